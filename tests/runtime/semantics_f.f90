! A representative subset of the intercepted calls through the `use mpi`
! Fortran bindings, results checked against closed forms.  Any number of
! ranks >= 2.  Prints "semantics_f: rank <r> blocking=<n>" (n = blocking
! calls made, for comparison with libvhpc_wait's calls= count) and, after
! MPI_Finalize, "semantics_f: rank <r> finalized".
program semantics_f
  use mpi
  implicit none
  integer, parameter :: n = 100, big = 70000
  integer :: ierr, rank, nproc, left, right, nblk, cnt, i, j, root, sum1
  integer :: status(MPI_STATUS_SIZE), statuses(MPI_STATUS_SIZE, 4)
  integer :: req(4)
  integer :: sbuf(n), rbuf(n), x(4), y(4)
  integer, allocatable :: a(:), b(:), gath(:)
  double precision :: d(3), dsum(3)

  nblk = 0
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nproc, ierr)
  call check(nproc >= 2, 'needs at least 2 ranks')
  right = mod(rank + 1, nproc)
  left = mod(rank - 1 + nproc, nproc)
  allocate(a(big), b(big), gath(nproc * 4))

  ! Send / Recv around the ring; rank 0 speaks first.
  do i = 1, n
    sbuf(i) = rank * 1000 + i
  end do
  rbuf = -1
  if (rank == 0) then
    call MPI_Send(sbuf, n, MPI_INTEGER, right, 7, MPI_COMM_WORLD, ierr)
    call counted('MPI_Send')
    call MPI_Recv(rbuf, n, MPI_INTEGER, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, status, ierr)
    call counted('MPI_Recv')
  else
    call MPI_Recv(rbuf, n, MPI_INTEGER, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, status, ierr)
    call counted('MPI_Recv')
    call MPI_Send(sbuf, n, MPI_INTEGER, right, 7, MPI_COMM_WORLD, ierr)
    call counted('MPI_Send')
  end if
  call expect_status(status, left, 7, n, 'Recv status')
  call check(all_eq(rbuf, left * 1000, n), 'Recv data')

  ! Large Ssend (rendezvous) the same way.
  do i = 1, big
    a(i) = rank + 3 * i
  end do
  if (rank == 0) then
    call MPI_Ssend(a, big, MPI_INTEGER, right, 8, MPI_COMM_WORLD, ierr)
    call counted('MPI_Ssend')
    call MPI_Recv(b, big, MPI_INTEGER, left, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call counted('MPI_Recv')
  else
    call MPI_Recv(b, big, MPI_INTEGER, left, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call counted('MPI_Recv')
    call MPI_Ssend(a, big, MPI_INTEGER, right, 8, MPI_COMM_WORLD, ierr)
    call counted('MPI_Ssend')
  end if
  do i = 1, big
    call check(b(i) == left + 3 * i, 'Ssend/Recv large data')
  end do

  ! Sendrecv: counts and tags differ per sender.
  rbuf = -1
  call MPI_Sendrecv(sbuf, rank + 1, MPI_INTEGER, right, 20 + rank, rbuf, n, MPI_INTEGER, &
                    left, MPI_ANY_TAG, MPI_COMM_WORLD, status, ierr)
  call counted('MPI_Sendrecv')
  call expect_status(status, left, 20 + left, left + 1, 'Sendrecv status')
  call check(all_eq(rbuf, left * 1000, left + 1), 'Sendrecv data')

  ! Sendrecv_replace
  rbuf = sbuf
  call MPI_Sendrecv_replace(rbuf, n, MPI_INTEGER, right, 30, left, 30, MPI_COMM_WORLD, &
                            status, ierr)
  call counted('MPI_Sendrecv_replace')
  call expect_status(status, left, 30, n, 'Sendrecv_replace status')
  call check(all_eq(rbuf, left * 1000, n), 'Sendrecv_replace data')

  ! Probe the size, then receive exactly that much.
  call MPI_Isend(sbuf, mod(rank * 7, 13) + 1, MPI_INTEGER, right, 40, MPI_COMM_WORLD, &
                 req(1), ierr)
  call MPI_Probe(MPI_ANY_SOURCE, 40, MPI_COMM_WORLD, status, ierr)
  call counted('MPI_Probe')
  call MPI_Get_count(status, MPI_INTEGER, cnt, ierr)
  call check(status(MPI_SOURCE) == left .and. cnt == mod(left * 7, 13) + 1, 'Probe status')
  rbuf = -1
  call MPI_Recv(rbuf, cnt, MPI_INTEGER, status(MPI_SOURCE), 40, MPI_COMM_WORLD, status, ierr)
  call counted('MPI_Recv')
  call check(all_eq(rbuf, left * 1000, cnt), 'Recv after Probe data')
  call MPI_Wait(req(1), MPI_STATUS_IGNORE, ierr)
  call counted('MPI_Wait')
  call check(req(1) == MPI_REQUEST_NULL, 'Wait left the request active')

  ! Wait and Waitall on mixed requests, a null one included.
  rbuf = -1
  b = -1
  call MPI_Irecv(rbuf, n, MPI_INTEGER, left, 50, MPI_COMM_WORLD, req(1), ierr)
  call MPI_Isend(sbuf, n, MPI_INTEGER, right, 50, MPI_COMM_WORLD, req(2), ierr)
  call MPI_Irecv(b, big, MPI_INTEGER, right, 51, MPI_COMM_WORLD, req(3), ierr)
  call MPI_Isend(a, big, MPI_INTEGER, left, 51, MPI_COMM_WORLD, req(4), ierr)
  call MPI_Wait(req(1), status, ierr)
  call counted('MPI_Wait')
  call expect_status(status, left, 50, n, 'Wait status')
  call check(req(1) == MPI_REQUEST_NULL, 'Wait left the request active')
  ! req(1) is now null: Waitall must accept it.
  call MPI_Waitall(4, req, statuses, ierr)
  call counted('MPI_Waitall')
  call expect_status(statuses(:, 3), right, 51, big, 'Waitall status')
  call check(all(req == MPI_REQUEST_NULL), 'Waitall left requests active')
  call check(all_eq(rbuf, left * 1000, n), 'Wait data')
  do i = 1, big
    call check(b(i) == right + 3 * i, 'Waitall large data')
  end do
  call MPI_Irecv(x, 4, MPI_INTEGER, left, 52, MPI_COMM_WORLD, req(1), ierr)
  call MPI_Isend(sbuf, 4, MPI_INTEGER, right, 52, MPI_COMM_WORLD, req(2), ierr)
  call MPI_Waitall(2, req, MPI_STATUSES_IGNORE, ierr)
  call counted('MPI_Waitall')
  call check(all_eq(x, left * 1000, 4), 'Waitall STATUSES_IGNORE data')

  ! Collectives.
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call counted('MPI_Barrier')

  root = nproc - 1
  rbuf = -1
  if (rank == root) rbuf = sbuf
  call MPI_Bcast(rbuf, n, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
  call counted('MPI_Bcast')
  call check(all_eq(rbuf, root * 1000, n), 'Bcast data')

  do i = 1, 4
    x(i) = (rank + 1) * i
  end do
  call MPI_Allreduce(x, y, 4, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call counted('MPI_Allreduce')
  do i = 1, 4
    call check(y(i) == i * nproc * (nproc + 1) / 2, 'Allreduce SUM')
  end do
  call MPI_Allreduce(MPI_IN_PLACE, x, 4, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call counted('MPI_Allreduce')
  do i = 1, 4
    call check(x(i) == i * nproc * (nproc + 1) / 2, 'Allreduce IN_PLACE')
  end do
  d = [rank * 0.5d0, -dble(rank), 2.0d0]
  call MPI_Allreduce(d, dsum, 3, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  call counted('MPI_Allreduce')
  call check(dsum(1) == (nproc - 1) * 0.5d0 .and. dsum(2) == 0d0 .and. dsum(3) == 2d0, &
             'Allreduce MAX double precision')

  ! Alltoall: element j (0-based) of rank r goes to rank j.
  do j = 0, nproc - 1
    a(j + 1) = rank * 100 + j
  end do
  call MPI_Alltoall(a, 1, MPI_INTEGER, gath, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call counted('MPI_Alltoall')
  do j = 0, nproc - 1
    call check(gath(j + 1) == j * 100 + rank, 'Alltoall data')
  end do

  ! Gather two values per rank at rank 0.
  x(1:2) = [rank * 10, rank * 10 + 1]
  gath = -1
  call MPI_Gather(x, 2, MPI_INTEGER, gath, 2, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call counted('MPI_Gather')
  if (rank == 0) then
    do j = 0, nproc - 1
      call check(gath(2 * j + 1) == j * 10 .and. gath(2 * j + 2) == j * 10 + 1, 'Gather data')
    end do
  end if

  ! Inclusive prefix sum of rank+1.
  cnt = rank + 1
  call MPI_Scan(cnt, sum1, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call counted('MPI_Scan')
  call check(sum1 == (rank + 1) * (rank + 2) / 2, 'Scan')

  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call counted('MPI_Barrier')

  write(*, '(a,i0,a,i0)') 'semantics_f: rank ', rank, ' blocking=', nblk
  flush(6)
  call MPI_Finalize(ierr)
  write(*, '(a,i0,a)') 'semantics_f: rank ', rank, ' finalized'

contains

  subroutine check(cond, what)
    logical, intent(in) :: cond
    character(*), intent(in) :: what
    integer :: e
    if (.not. cond) then
      write(0, '(a,i0,2a)') 'semantics_f: rank ', rank, ': check failed: ', what
      flush(0)
      call MPI_Abort(MPI_COMM_WORLD, 3, e)
    end if
  end subroutine check

  ! After each blocking call: count it and require success.
  subroutine counted(what)
    character(*), intent(in) :: what
    nblk = nblk + 1
    call check(ierr == MPI_SUCCESS, what // ' returned an error')
  end subroutine counted

  subroutine expect_status(st, src, tag, count, what)
    integer, intent(in) :: st(MPI_STATUS_SIZE), src, tag, count
    character(*), intent(in) :: what
    integer :: c, e
    call MPI_Get_count(st, MPI_INTEGER, c, e)
    call check(st(MPI_SOURCE) == src .and. st(MPI_TAG) == tag .and. c == count, what)
  end subroutine expect_status

  ! buf(i) == base + i for i = 1..m
  logical function all_eq(buf, base, m)
    integer, intent(in) :: buf(:), base, m
    integer :: k
    all_eq = .true.
    do k = 1, m
      if (buf(k) /= base + k) all_eq = .false.
    end do
  end function all_eq

end program semantics_f
