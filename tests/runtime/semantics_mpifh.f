! Fixed-form Fortran through include 'mpif.h': the same representative
! subset as semantics_f.f90, results checked against closed forms.
! Prints "semantics_mpifh: rank <r> blocking=<n>" and, after
! MPI_Finalize, "semantics_mpifh: rank <r> finalized".
      program semmpifh
      implicit none
      include 'mpif.h'
      integer n, big
      parameter (n = 64, big = 70000)
      integer ierr, rank, nproc, left, right, nblk, cnt, i, j, root
      integer isum
      integer status(MPI_STATUS_SIZE), statuses(MPI_STATUS_SIZE, 4)
      integer req(4), sbuf(n), rbuf(n), x(4), y(4), g(256)
      integer a(big), b(big)
      common /cnt/ nblk, rank

      nblk = 0
      call MPI_Init(ierr)
      call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
      call MPI_Comm_size(MPI_COMM_WORLD, nproc, ierr)
      call check(nproc .ge. 2 .and. nproc .le. 64, 'rank count')
      right = mod(rank + 1, nproc)
      left = mod(rank - 1 + nproc, nproc)
      do i = 1, n
         sbuf(i) = rank * 1000 + i
      end do

! Send / Recv around the ring; rank 0 speaks first.
      if (rank .eq. 0) then
         call MPI_Send(sbuf, n, MPI_INTEGER, right, 7,
     &        MPI_COMM_WORLD, ierr)
         call counted(ierr, 'MPI_Send')
         call MPI_Recv(rbuf, n, MPI_INTEGER, MPI_ANY_SOURCE,
     &        MPI_ANY_TAG, MPI_COMM_WORLD, status, ierr)
         call counted(ierr, 'MPI_Recv')
      else
         call MPI_Recv(rbuf, n, MPI_INTEGER, MPI_ANY_SOURCE,
     &        MPI_ANY_TAG, MPI_COMM_WORLD, status, ierr)
         call counted(ierr, 'MPI_Recv')
         call MPI_Send(sbuf, n, MPI_INTEGER, right, 7,
     &        MPI_COMM_WORLD, ierr)
         call counted(ierr, 'MPI_Send')
      end if
      call expstat(status, left, 7, n, 'Recv status')
      call expvals(rbuf, left * 1000, n, 'Recv data')

! Large Ssend (rendezvous protocol).
      do i = 1, big
         a(i) = rank + 3 * i
      end do
      if (rank .eq. 0) then
         call MPI_Ssend(a, big, MPI_INTEGER, right, 8,
     &        MPI_COMM_WORLD, ierr)
         call counted(ierr, 'MPI_Ssend')
         call MPI_Recv(b, big, MPI_INTEGER, left, 8, MPI_COMM_WORLD,
     &        MPI_STATUS_IGNORE, ierr)
         call counted(ierr, 'MPI_Recv')
      else
         call MPI_Recv(b, big, MPI_INTEGER, left, 8, MPI_COMM_WORLD,
     &        MPI_STATUS_IGNORE, ierr)
         call counted(ierr, 'MPI_Recv')
         call MPI_Ssend(a, big, MPI_INTEGER, right, 8,
     &        MPI_COMM_WORLD, ierr)
         call counted(ierr, 'MPI_Ssend')
      end if
      do i = 1, big
         call check(b(i) .eq. left + 3 * i, 'Ssend/Recv large data')
      end do

! Sendrecv with per-sender counts and tags.
      call MPI_Sendrecv(sbuf, rank + 1, MPI_INTEGER, right, 20 + rank,
     &     rbuf, n, MPI_INTEGER, left, MPI_ANY_TAG, MPI_COMM_WORLD,
     &     status, ierr)
      call counted(ierr, 'MPI_Sendrecv')
      call expstat(status, left, 20 + left, left + 1, 'Sendrecv')
      call expvals(rbuf, left * 1000, left + 1, 'Sendrecv data')

! Sendrecv_replace
      do i = 1, n
         rbuf(i) = sbuf(i)
      end do
      call MPI_Sendrecv_replace(rbuf, n, MPI_INTEGER, right, 30,
     &     left, 30, MPI_COMM_WORLD, status, ierr)
      call counted(ierr, 'MPI_Sendrecv_replace')
      call expstat(status, left, 30, n, 'Sendrecv_replace status')
      call expvals(rbuf, left * 1000, n, 'Sendrecv_replace data')

! Probe the size, then receive exactly that much.
      call MPI_Isend(sbuf, mod(rank * 7, 13) + 1, MPI_INTEGER, right,
     &     40, MPI_COMM_WORLD, req(1), ierr)
      call MPI_Probe(MPI_ANY_SOURCE, 40, MPI_COMM_WORLD, status, ierr)
      call counted(ierr, 'MPI_Probe')
      call MPI_Get_count(status, MPI_INTEGER, cnt, ierr)
      call check(status(MPI_SOURCE) .eq. left .and.
     &     cnt .eq. mod(left * 7, 13) + 1, 'Probe status')
      call MPI_Recv(rbuf, cnt, MPI_INTEGER, status(MPI_SOURCE), 40,
     &     MPI_COMM_WORLD, status, ierr)
      call counted(ierr, 'MPI_Recv')
      call expvals(rbuf, left * 1000, cnt, 'Recv after Probe')
      call MPI_Wait(req(1), MPI_STATUS_IGNORE, ierr)
      call counted(ierr, 'MPI_Wait')

! Wait, then Waitall over the rest with the completed (null) request.
      call MPI_Irecv(rbuf, n, MPI_INTEGER, left, 50, MPI_COMM_WORLD,
     &     req(1), ierr)
      call MPI_Isend(sbuf, n, MPI_INTEGER, right, 50, MPI_COMM_WORLD,
     &     req(2), ierr)
      call MPI_Irecv(b, big, MPI_INTEGER, right, 51, MPI_COMM_WORLD,
     &     req(3), ierr)
      call MPI_Wait(req(1), status, ierr)
      call counted(ierr, 'MPI_Wait')
      call expstat(status, left, 50, n, 'Wait status')
      call check(req(1) .eq. MPI_REQUEST_NULL, 'Wait left it active')
      call MPI_Isend(a, big, MPI_INTEGER, left, 51, MPI_COMM_WORLD,
     &     req(4), ierr)
      call MPI_Waitall(4, req, statuses, ierr)
      call counted(ierr, 'MPI_Waitall')
      call expstat(statuses(1, 3), right, 51, big, 'Waitall status')
      do i = 1, 4
         call check(req(i) .eq. MPI_REQUEST_NULL, 'Waitall active')
      end do
      do i = 1, big
         call check(b(i) .eq. right + 3 * i, 'Waitall large data')
      end do
      call MPI_Irecv(x, 4, MPI_INTEGER, left, 52, MPI_COMM_WORLD,
     &     req(1), ierr)
      call MPI_Isend(sbuf, 4, MPI_INTEGER, right, 52, MPI_COMM_WORLD,
     &     req(2), ierr)
      call MPI_Waitall(2, req, MPI_STATUSES_IGNORE, ierr)
      call counted(ierr, 'MPI_Waitall')
      call expvals(x, left * 1000, 4, 'Waitall STATUSES_IGNORE')

! Collectives.
      call MPI_Barrier(MPI_COMM_WORLD, ierr)
      call counted(ierr, 'MPI_Barrier')

      root = nproc - 1
      do i = 1, n
         rbuf(i) = -1
         if (rank .eq. root) rbuf(i) = sbuf(i)
      end do
      call MPI_Bcast(rbuf, n, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
      call counted(ierr, 'MPI_Bcast')
      call expvals(rbuf, root * 1000, n, 'Bcast data')

      do i = 1, 4
         x(i) = (rank + 1) * i
      end do
      call MPI_Allreduce(x, y, 4, MPI_INTEGER, MPI_SUM,
     &     MPI_COMM_WORLD, ierr)
      call counted(ierr, 'MPI_Allreduce')
      call MPI_Allreduce(MPI_IN_PLACE, x, 4, MPI_INTEGER, MPI_SUM,
     &     MPI_COMM_WORLD, ierr)
      call counted(ierr, 'MPI_Allreduce')
      do i = 1, 4
         call check(y(i) .eq. i * nproc * (nproc + 1) / 2,
     &        'Allreduce SUM')
         call check(x(i) .eq. i * nproc * (nproc + 1) / 2,
     &        'Allreduce IN_PLACE')
      end do

! Alltoall: element j (0-based) of rank r goes to rank j.
      do j = 0, nproc - 1
         a(j + 1) = rank * 100 + j
      end do
      call MPI_Alltoall(a, 1, MPI_INTEGER, g, 1, MPI_INTEGER,
     &     MPI_COMM_WORLD, ierr)
      call counted(ierr, 'MPI_Alltoall')
      do j = 0, nproc - 1
         call check(g(j + 1) .eq. j * 100 + rank, 'Alltoall data')
      end do

! Gather two values per rank at rank 0.
      x(1) = rank * 10
      x(2) = rank * 10 + 1
      call MPI_Gather(x, 2, MPI_INTEGER, g, 2, MPI_INTEGER, 0,
     &     MPI_COMM_WORLD, ierr)
      call counted(ierr, 'MPI_Gather')
      if (rank .eq. 0) then
         do j = 0, nproc - 1
            call check(g(2 * j + 1) .eq. j * 10 .and.
     &           g(2 * j + 2) .eq. j * 10 + 1, 'Gather data')
         end do
      end if

! Inclusive prefix sum of rank+1.
      cnt = rank + 1
      call MPI_Scan(cnt, isum, 1, MPI_INTEGER, MPI_SUM,
     &     MPI_COMM_WORLD, ierr)
      call counted(ierr, 'MPI_Scan')
      call check(isum .eq. (rank + 1) * (rank + 2) / 2, 'Scan')

      call MPI_Barrier(MPI_COMM_WORLD, ierr)
      call counted(ierr, 'MPI_Barrier')

      write(*, '(a,i0,a,i0)') 'semantics_mpifh: rank ', rank,
     &     ' blocking=', nblk
      flush(6)
      call MPI_Finalize(ierr)
      write(*, '(a,i0,a)') 'semantics_mpifh: rank ', rank,
     &     ' finalized'
      end

      subroutine check(cond, what)
      implicit none
      include 'mpif.h'
      logical cond
      character*(*) what
      integer nblk, rank, e
      common /cnt/ nblk, rank
      if (.not. cond) then
         write(0, '(a,i0,2a)') 'semantics_mpifh: rank ', rank,
     &        ': check failed: ', what
         flush(0)
         call MPI_Abort(MPI_COMM_WORLD, 3, e)
      end if
      end

! After each blocking call: count it and require success.
      subroutine counted(ierr, what)
      implicit none
      include 'mpif.h'
      integer ierr
      character*(*) what
      integer nblk, rank
      common /cnt/ nblk, rank
      nblk = nblk + 1
      call check(ierr .eq. MPI_SUCCESS, what)
      end

      subroutine expstat(st, src, tag, count, what)
      implicit none
      include 'mpif.h'
      integer st(MPI_STATUS_SIZE), src, tag, count, c, e
      character*(*) what
      call MPI_Get_count(st, MPI_INTEGER, c, e)
      call check(st(MPI_SOURCE) .eq. src .and. st(MPI_TAG) .eq. tag
     &     .and. c .eq. count, what)
      end

! buf(i) == base + i for i = 1..m
      subroutine expvals(buf, base, m, what)
      implicit none
      integer m, buf(m), base, k
      character*(*) what
      do k = 1, m
         call check(buf(k) .eq. base + k, what)
      end do
      end
