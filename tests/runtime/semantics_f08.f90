! The intercepted calls through the `use mpi_f08` bindings, results checked
! against closed forms: point to point, every Wait, every blocking collective
! the library handles, error codes under MPI_ERRORS_RETURN, a generalized
! request, and calls with ierror left out.  Any number of ranks >= 2.
! Prints "semantics_f08: rank <r> blocking=<n>" (n = blocking calls made, for
! comparison with libvhpc_wait's calls= count) and, after MPI_Finalize,
! "semantics_f08: rank <r> finalized".

! A generalized request's callbacks, which count their calls: completion must run
! the query function once, as the MPI's own MPI_Waitall does.
module greq_f08
  use mpi_f08
  implicit none
  integer :: queries = 0, frees = 0
contains
  subroutine query_fn(extra_state, status, ierror)
    integer(kind=MPI_ADDRESS_KIND) :: extra_state
    type(MPI_Status) :: status
    integer :: ierror
    queries = queries + 1
    call MPI_Status_set_elements(status, MPI_BYTE, 0, ierror)
    call MPI_Status_set_cancelled(status, .false., ierror)
    status%MPI_SOURCE = MPI_UNDEFINED
    status%MPI_TAG = int(extra_state)
    ierror = MPI_SUCCESS
  end subroutine query_fn

  subroutine free_fn(extra_state, ierror)
    integer(kind=MPI_ADDRESS_KIND) :: extra_state
    integer :: ierror
    frees = frees + 1
    ierror = MPI_SUCCESS
  end subroutine free_fn

  subroutine cancel_fn(extra_state, complete, ierror)
    integer(kind=MPI_ADDRESS_KIND) :: extra_state
    logical :: complete
    integer :: ierror
    ierror = MPI_SUCCESS
  end subroutine cancel_fn
end module greq_f08

program semantics_f08
  use mpi_f08
  use greq_f08
  implicit none
  integer, parameter :: n = 100, big = 70000
  integer :: ierr, rank, nproc, left, right, nblk, cnt, i, j, k, root, sum1, idx, outn, cls
  integer :: done, got_left, got_right
  type(MPI_Status) :: status, statuses(4), ignore0, ignores0
  type(MPI_Request) :: req(4)
  type(MPI_Comm) :: ecomm
  integer :: sbuf(n), rbuf(n), x(4), y(4), indices(4)
  integer, allocatable :: a(:), b(:), gath(:), counts(:), displs(:)
  double precision :: d(3), dsum(3)
  integer(kind=MPI_ADDRESS_KIND) :: extra
  character(len=1000) :: line
  integer :: base
  logical :: arrived

  nblk = 0
  call MPI_Init()  ! ierror left out: the f08 entry point must not store it
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nproc)
  call check(nproc >= 2, 'needs at least 2 ranks')
  right = mod(rank + 1, nproc)
  left = mod(rank - 1 + nproc, nproc)
  allocate(a(big), b(big), gath(nproc * 4), counts(nproc), displs(nproc))
  ! The ignore sentinels must never be written to: compared at the end.
  line = ''
  base = index_base()
  ignore0 = MPI_STATUS_IGNORE
  ignores0 = MPI_STATUSES_IGNORE(1)

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

  ! The same without ierror.
  rbuf = -1
  if (rank == 0) then
    call MPI_Send(sbuf, 5, MPI_INTEGER, right, 6, MPI_COMM_WORLD)
    call MPI_Recv(rbuf, n, MPI_INTEGER, left, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
  else
    call MPI_Recv(rbuf, n, MPI_INTEGER, left, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
    call MPI_Send(sbuf, 5, MPI_INTEGER, right, 6, MPI_COMM_WORLD)
  end if
  nblk = nblk + 2
  call check(all_eq(rbuf, left * 1000, 5), 'Recv without ierror data')

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

  ! Rsend: every receive is posted before the barrier, every ready send after it.
  x = -1
  call MPI_Irecv(x, 4, MPI_INTEGER, left, 9, MPI_COMM_WORLD, req(1), ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call counted('MPI_Barrier')
  call MPI_Rsend(sbuf, 4, MPI_INTEGER, right, 9, MPI_COMM_WORLD, ierr)
  call counted('MPI_Rsend')
  call MPI_Wait(req(1), status, ierr)
  call counted('MPI_Wait')
  call expect_status(status, left, 9, 4, 'Rsend/Wait status')
  call check(all_eq(x, left * 1000, 4), 'Rsend data')

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
  call check(status%MPI_SOURCE == left .and. cnt == mod(left * 7, 13) + 1, 'Probe status')
  rbuf = -1
  call MPI_Recv(rbuf, cnt, MPI_INTEGER, status%MPI_SOURCE, 40, MPI_COMM_WORLD, status, ierr)
  call counted('MPI_Recv')
  call check(all_eq(rbuf, left * 1000, cnt), 'Recv after Probe data')
  call MPI_Wait(req(1), MPI_STATUS_IGNORE)  ! ierror left out
  nblk = nblk + 1
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
  call MPI_Waitall(4, req, statuses, ierr)
  call counted('MPI_Waitall')
  call expect_status(statuses(3), right, 51, big, 'Waitall status')
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

  ! Waitany until both are done, then once more on nulls only.
  x = -1
  got_left = 0
  call MPI_Irecv(x, 4, MPI_INTEGER, left, 60, MPI_COMM_WORLD, req(1), ierr)
  call MPI_Isend(sbuf, 4, MPI_INTEGER, right, 60, MPI_COMM_WORLD, req(2), ierr)
  do k = 1, 2
    call MPI_Waitany(2, req, idx, status, ierr)
    call counted('MPI_Waitany')
    j = idx + 1 - base
    call check(j == 1 .or. j == 2, 'Waitany index')
    call check(req(j) == MPI_REQUEST_NULL, 'Waitany left the request active')
    if (j == 1) then
      call expect_status(status, left, 60, 4, 'Waitany status')
      got_left = got_left + 1
    end if
  end do
  call check(got_left == 1, 'Waitany completed the receive once')
  call check(all_eq(x, left * 1000, 4), 'Waitany data')
  call MPI_Waitany(2, req, idx, status, ierr)
  call counted('MPI_Waitany')
  call check(idx == MPI_UNDEFINED, 'Waitany on null requests')

  ! Waitsome until all four are done, then once more on nulls only.
  x = -1
  y = -1
  call MPI_Irecv(x, 4, MPI_INTEGER, left, 61, MPI_COMM_WORLD, req(1), ierr)
  call MPI_Irecv(y, 3, MPI_INTEGER, right, 62, MPI_COMM_WORLD, req(2), ierr)
  call MPI_Isend(sbuf, 4, MPI_INTEGER, right, 61, MPI_COMM_WORLD, req(3), ierr)
  call MPI_Isend(sbuf, 3, MPI_INTEGER, left, 62, MPI_COMM_WORLD, req(4), ierr)
  done = 0
  got_left = 0
  got_right = 0
  do while (done < 4)
    call MPI_Waitsome(4, req, outn, indices, statuses, ierr)
    call counted('MPI_Waitsome')
    call check(outn >= 1 .and. done + outn <= 4, 'Waitsome count')
    do k = 1, outn
      j = indices(k) + 1 - base
      call check(j >= 1 .and. j <= 4, 'Waitsome index')
      call check(req(j) == MPI_REQUEST_NULL, 'Waitsome left a request active')
      if (j == 1) then
        call expect_status(statuses(k), left, 61, 4, 'Waitsome status (left)')
        got_left = got_left + 1
      else if (j == 2) then
        call expect_status(statuses(k), right, 62, 3, 'Waitsome status (right)')
        got_right = got_right + 1
      end if
    end do
    done = done + outn
  end do
  call check(got_left == 1 .and. got_right == 1, 'Waitsome completed each receive once')
  call check(all_eq(x, left * 1000, 4) .and. all_eq(y, right * 1000, 3), 'Waitsome data')
  call MPI_Waitsome(4, req, outn, indices, MPI_STATUSES_IGNORE, ierr)
  call counted('MPI_Waitsome')
  call check(outn == MPI_UNDEFINED, 'Waitsome on null requests')

  ! Error codes, on a communicator that returns them. What a failed call leaves in
  ! statuses, handles and indices is each MPI's own (Open MPI's Fortran waits leave
  ! them as they were): one line of it, for the harness to compare with a run
  ! without the library. Statuses are preset to tell "left alone" from "written".
  ! MPICH 4.0 raises a failed wait's error on MPI_COMM_WORLD: it returns them too.
  call MPI_Comm_dup(MPI_COMM_WORLD, ecomm, ierr)
  call MPI_Comm_set_errhandler(ecomm, MPI_ERRORS_RETURN, ierr)
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  call MPI_Send(sbuf, 1, MPI_INTEGER, nproc + 1, 0, ecomm, ierr)
  nblk = nblk + 1
  call expect_class(ierr, MPI_ERR_RANK, 'Send to a rank that does not exist')
  ! Four integers into room for two: Recv, Wait, Waitany, Waitsome, Waitall.
  call MPI_Isend(sbuf, 4, MPI_INTEGER, right, 70, ecomm, req(4), ierr)
  call preset(status)
  call MPI_Recv(x, 2, MPI_INTEGER, left, 70, ecomm, status, ierr)
  nblk = nblk + 1
  call expect_class(ierr, MPI_ERR_TRUNCATE, 'Recv truncated')
  call observe('recv', status, 1)
  call finish_send()
  call MPI_Irecv(x, 2, MPI_INTEGER, left, 71, ecomm, req(1), ierr)
  call MPI_Isend(sbuf, 4, MPI_INTEGER, right, 71, ecomm, req(4), ierr)
  call preset(status)
  call MPI_Wait(req(1), status, ierr)
  nblk = nblk + 1
  call expect_class(ierr, MPI_ERR_TRUNCATE, 'Wait truncated')
  call observe('wait', status, 1)
  call finish_send()
  req(1) = MPI_REQUEST_NULL
  call MPI_Irecv(x, 2, MPI_INTEGER, left, 72, ecomm, req(2), ierr)
  call MPI_Isend(sbuf, 4, MPI_INTEGER, right, 72, ecomm, req(4), ierr)
  call preset(status)
  idx = -5
  call MPI_Waitany(2, req, idx, status, ierr)
  nblk = nblk + 1
  call expect_class(ierr, MPI_ERR_TRUNCATE, 'Waitany truncated')
  call observe('waitany', status, 2)
  write(line(len_trim(line) + 1:), '(a,i0)') ' index=', idx
  call finish_send()
  call MPI_Irecv(x, 2, MPI_INTEGER, left, 73, ecomm, req(2), ierr)
  call MPI_Isend(sbuf, 4, MPI_INTEGER, right, 73, ecomm, req(4), ierr)
  call preset(statuses(1))
  outn = -5
  indices = -5
  call MPI_Waitsome(2, req, outn, indices, statuses, ierr)
  nblk = nblk + 1
  call expect_class(ierr, MPI_ERR_IN_STATUS, 'Waitsome truncated')
  call observe('waitsome', statuses(1), 2)
  write(line(len_trim(line) + 1:), '(2(a,i0))') ' outcount=', outn, ' index=', indices(1)
  call finish_send()
  ! Waitall: beside the failing receive, one that fits and their two sends.
  y = -1
  call MPI_Irecv(x, 2, MPI_INTEGER, left, 74, ecomm, req(1), ierr)
  call MPI_Irecv(y, 4, MPI_INTEGER, left, 75, ecomm, req(2), ierr)
  call MPI_Isend(sbuf, 4, MPI_INTEGER, right, 74, ecomm, req(3), ierr)
  call MPI_Isend(sbuf, 4, MPI_INTEGER, right, 75, ecomm, req(4), ierr)
  ! Let the fitting receive arrive first (a bounded poll, not a blocking call): Open MPI 4.1
  ! leaves one that had not yet arrived pending, and its Fortran Waitall then returns neither
  ! that status nor the handle, so the request could never be finished here.
  do k = 1, 10000000
    call MPI_Request_get_status(req(2), arrived, MPI_STATUS_IGNORE, ierr)
    if (arrived) exit
  end do
  do k = 1, 4
    call preset(statuses(k))
  end do
  call MPI_Waitall(4, req, statuses, ierr)
  nblk = nblk + 1
  call expect_class(ierr, MPI_ERR_IN_STATUS, 'Waitall with a truncated receive')
  call observe('waitall', statuses(1), 1)
  call observe('waitall2', statuses(2), 2)
  do k = 1, 4  ! still active, if the MPI says so
    if (statuses(k)%MPI_ERROR == MPI_ERR_PENDING) then
      call MPI_Wait(req(k), MPI_STATUS_IGNORE, ierr)
      call counted('MPI_Wait of a request left pending')
    end if
  end do
  call check(all_eq(y, left * 1000, 4), 'Waitall data beside an error')
  write(*, '(a,i0,2a)') 'semantics_f08: rank ', rank, ' errors:', trim(line)
  call MPI_Comm_free(ecomm, ierr)
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL, ierr)

  ! Collectives.
  call MPI_Barrier(MPI_COMM_WORLD)  ! ierror left out
  nblk = nblk + 1

  root = nproc - 1
  rbuf = -1
  if (rank == root) rbuf = sbuf
  call MPI_Bcast(rbuf, n, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
  call counted('MPI_Bcast')
  call check(all_eq(rbuf, root * 1000, n), 'Bcast data')

  do i = 1, 4
    x(i) = (rank + 1) * i
  end do
  y = -1
  call MPI_Reduce(x, y, 4, MPI_INTEGER, MPI_SUM, root, MPI_COMM_WORLD, ierr)
  call counted('MPI_Reduce')
  if (rank == root) then
    do i = 1, 4
      call check(y(i) == i * nproc * (nproc + 1) / 2, 'Reduce SUM')
    end do
  end if
  call MPI_Allreduce(x, y, 4, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call counted('MPI_Allreduce')
  do i = 1, 4
    call check(y(i) == i * nproc * (nproc + 1) / 2, 'Allreduce SUM')
  end do
  call MPI_Allreduce(MPI_IN_PLACE, x, 4, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)  ! no ierror
  nblk = nblk + 1
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

  ! Alltoallv: one element to each rank, at displacement j (the same as Alltoall).
  do j = 0, nproc - 1
    counts(j + 1) = 1
    displs(j + 1) = j
  end do
  gath = -1
  call MPI_Alltoallv(a, counts, displs, MPI_INTEGER, gath, counts, displs, MPI_INTEGER, &
                     MPI_COMM_WORLD, ierr)
  call counted('MPI_Alltoallv')
  do j = 0, nproc - 1
    call check(gath(j + 1) == j * 100 + rank, 'Alltoallv data')
  end do

  ! Allgather and Allgatherv of two values per rank.
  x(1:2) = [rank * 10, rank * 10 + 1]
  gath = -1
  call MPI_Allgather(x, 2, MPI_INTEGER, gath, 2, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call counted('MPI_Allgather')
  call check(pairs_ok(gath), 'Allgather data')
  do j = 0, nproc - 1
    counts(j + 1) = 2
    displs(j + 1) = 2 * j
  end do
  gath = -1
  call MPI_Allgatherv(x, 2, MPI_INTEGER, gath, counts, displs, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call counted('MPI_Allgatherv')
  call check(pairs_ok(gath), 'Allgatherv data')

  ! Gather and Gatherv at rank 0.
  gath = -1
  call MPI_Gather(x, 2, MPI_INTEGER, gath, 2, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call counted('MPI_Gather')
  if (rank == 0) call check(pairs_ok(gath), 'Gather data')
  gath = -1
  call MPI_Gatherv(x, 2, MPI_INTEGER, gath, counts, displs, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call counted('MPI_Gatherv')
  if (rank == 0) call check(pairs_ok(gath), 'Gatherv data')

  ! Scatter and Scatterv from the last rank: rank j gets j*10, j*10+1.
  gath = -1
  if (rank == root) then
    do j = 0, nproc - 1
      gath(2 * j + 1:2 * j + 2) = [j * 10, j * 10 + 1]
    end do
  end if
  x = -1
  call MPI_Scatter(gath, 2, MPI_INTEGER, x, 2, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
  call counted('MPI_Scatter')
  call check(x(1) == rank * 10 .and. x(2) == rank * 10 + 1, 'Scatter data')
  x = -1
  call MPI_Scatterv(gath, counts, displs, MPI_INTEGER, x, 2, MPI_INTEGER, root, &
                    MPI_COMM_WORLD, ierr)
  call counted('MPI_Scatterv')
  call check(x(1) == rank * 10 .and. x(2) == rank * 10 + 1, 'Scatterv data')

  ! Reduce_scatter_block and Reduce_scatter: rank j gets the sum of element j.
  do j = 0, nproc - 1
    gath(j + 1) = rank + j
    counts(j + 1) = 1
  end do
  cnt = -1
  call MPI_Reduce_scatter_block(gath, cnt, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call counted('MPI_Reduce_scatter_block')
  call check(cnt == nproc * (nproc - 1) / 2 + nproc * rank, 'Reduce_scatter_block')
  cnt = -1
  call MPI_Reduce_scatter(gath, cnt, counts, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call counted('MPI_Reduce_scatter')
  call check(cnt == nproc * (nproc - 1) / 2 + nproc * rank, 'Reduce_scatter')

  ! Inclusive and exclusive prefix sums of rank+1.
  cnt = rank + 1
  call MPI_Scan(cnt, sum1, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call counted('MPI_Scan')
  call check(sum1 == (rank + 1) * (rank + 2) / 2, 'Scan')
  sum1 = -1
  call MPI_Exscan(cnt, sum1, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call counted('MPI_Exscan')
  if (rank > 0) call check(sum1 == rank * (rank + 1) / 2, 'Exscan')

  ! A generalized request, complete before the Waitall that frees it beside a
  ! receive and a send: its query function runs once, its status is the query's.
  extra = 77
  call MPI_Grequest_start(query_fn, free_fn, cancel_fn, extra, req(1), ierr)
  call check(ierr == MPI_SUCCESS, 'Grequest_start')
  call MPI_Grequest_complete(req(1), ierr)
  x = -1
  call MPI_Irecv(x, 4, MPI_INTEGER, left, 80, MPI_COMM_WORLD, req(2), ierr)
  call MPI_Isend(sbuf, 4, MPI_INTEGER, right, 80, MPI_COMM_WORLD, req(3), ierr)
  call MPI_Waitall(3, req, statuses, ierr)
  call counted('MPI_Waitall with a generalized request')
  call check(queries == 1 .and. frees == 1, 'generalized request callbacks run once')
  call check(statuses(1)%MPI_TAG == 77, 'generalized request status')
  call expect_status(statuses(2), left, 80, 4, 'Waitall status beside a generalized request')
  call check(all(req(1:3) == MPI_REQUEST_NULL), 'Waitall left requests active')

  call check(same_fields(MPI_STATUS_IGNORE, ignore0), 'MPI_STATUS_IGNORE was written to')
  call check(same_fields(MPI_STATUSES_IGNORE(1), ignores0), 'MPI_STATUSES_IGNORE was written to')

  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call counted('MPI_Barrier')

  write(*, '(a,i0,a,i0)') 'semantics_f08: rank ', rank, ' blocking=', nblk
  flush(6)
  call MPI_Finalize(ierr)
  write(*, '(a,i0,a)') 'semantics_f08: rank ', rank, ' finalized'

contains

  subroutine check(cond, what)
    logical, intent(in) :: cond
    character(*), intent(in) :: what
    if (.not. cond) then
      write(0, '(a,i0,2a)') 'semantics_f08: rank ', rank, ': check failed: ', what
      flush(0)
      call MPI_Abort(MPI_COMM_WORLD, 3)
    end if
  end subroutine check

  ! After each blocking call given ierror: count it and require success.
  subroutine counted(what)
    character(*), intent(in) :: what
    nblk = nblk + 1
    call check(ierr == MPI_SUCCESS, what // ' returned an error')
  end subroutine counted

  subroutine expect_class(code, want, what)
    integer, intent(in) :: code, want
    character(*), intent(in) :: what
    call MPI_Error_class(code, cls)
    call check(cls == want, what)
  end subroutine expect_class

  subroutine expect_status(st, src, tag, count, what)
    type(MPI_Status), intent(in) :: st
    integer, intent(in) :: src, tag, count
    character(*), intent(in) :: what
    integer :: c
    call MPI_Get_count(st, MPI_INTEGER, c)
    call check(st%MPI_SOURCE == src .and. st%MPI_TAG == tag .and. c == count, what)
  end subroutine expect_status

  ! A status no call has written to.
  subroutine preset(st)
    type(MPI_Status), intent(out) :: st
    st%MPI_SOURCE = -7
    st%MPI_TAG = -7
    st%MPI_ERROR = -7
  end subroutine preset

  ! Append what a failed call left: its status (the error as a class) and whether
  ! request `r` is null now.
  subroutine observe(what, st, r)
    character(*), intent(in) :: what
    type(MPI_Status), intent(in) :: st
    integer, intent(in) :: r
    integer :: e
    e = st%MPI_ERROR
    if (e /= -7) call MPI_Error_class(st%MPI_ERROR, e)
    write(line(len_trim(line) + 1:), '(1x,a,3(a,i0),a,l1)') what, ' source=', st%MPI_SOURCE, &
        ' tag=', st%MPI_TAG, ' error=', e, ' null=', req(r) == MPI_REQUEST_NULL
  end subroutine observe

  ! Complete the send paired with a failed receive.
  subroutine finish_send()
    call MPI_Wait(req(4), MPI_STATUS_IGNORE, ierr)
    call counted('MPI_Wait of a send to a truncated receive')
  end subroutine finish_send

  ! Where MPI_Waitany and MPI_Waitsome count from: 1, but 0 in MPICH 4.0's mpi_f08
  ! (its bug, pmodels/mpich#6270), which the library must leave as it is.
  integer function index_base()
    character(len=MPI_MAX_LIBRARY_VERSION_STRING) :: v
    integer :: vlen, at
    call MPI_Get_library_version(v, vlen)
    index_base = 1
    at = index(v, 'MPICH Version:')
    if (at == 0) return
    at = at + len('MPICH Version:')
    do while (v(at:at) == ' ' .or. v(at:at) == achar(9))
      at = at + 1
    end do
    if (v(at:at + 3) == '4.0.') index_base = 0
  end function index_base

  logical function same_fields(s, t)
    type(MPI_Status), intent(in) :: s, t
    same_fields = s%MPI_SOURCE == t%MPI_SOURCE .and. s%MPI_TAG == t%MPI_TAG .and. &
                  s%MPI_ERROR == t%MPI_ERROR
  end function same_fields

  ! buf(i) == base + i for i = 1..m
  logical function all_eq(buf, base, m)
    integer, intent(in) :: buf(:), base, m
    integer :: i
    all_eq = .true.
    do i = 1, m
      if (buf(i) /= base + i) all_eq = .false.
    end do
  end function all_eq

  ! buf holds j*10, j*10+1 for every rank j in order.
  logical function pairs_ok(buf)
    integer, intent(in) :: buf(:)
    integer :: r
    pairs_ok = .true.
    do r = 0, nproc - 1
      if (buf(2 * r + 1) /= r * 10 .or. buf(2 * r + 2) /= r * 10 + 1) pairs_ok = .false.
    end do
  end function pairs_ok

end program semantics_f08
