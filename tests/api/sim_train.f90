! The embedding API from Fortran (include/ztrain/ztrain.f90): the C example's job, smaller. Rank 0
! simulates, reading an llm.c token shard in the order `ztrain train` reads it on one rank, and
! sends each micro-batch to rank 1, which trains over its own communicator (MPI_Comm_split) and saves
! a checkpoint at the end.
!   mpirun -np 2 sim_train_f CONFIG SHARD STEPS B T ACCUM CHECKPOINT_DIR
program sim_train_f
  use mpi
  use ztrain
  implicit none
  integer :: provided, ierr, rank, group, steps, k, fd, status(MPI_STATUS_SIZE)
  integer(c_int64_t) :: b, t, accum, count, slices, pos
  integer(c_int32_t) :: header(256)
  integer(c_int16_t), allocatable :: raw(:)
  integer(c_int32_t), allocatable :: shard(:), batch(:)
  character(len=4096) :: config, shard_path, checkpoint, arg
  type(c_ptr) :: trainer
  type(zt_step_result) :: result

  call MPI_Init_thread(MPI_THREAD_MULTIPLE, provided, ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call get_command_argument(1, config)
  call get_command_argument(2, shard_path)
  call get_command_argument(3, arg); read (arg, *) steps
  call get_command_argument(4, arg); read (arg, *) b
  call get_command_argument(5, arg); read (arg, *) t
  call get_command_argument(6, arg); read (arg, *) accum
  call get_command_argument(7, checkpoint)
  call MPI_Comm_split(MPI_COMM_WORLD, min(rank, 1), rank, group, ierr)
  allocate(batch(2 * b * t))

  if (rank == 0) then
    open (newunit=fd, file=trim(shard_path), access='stream', form='unformatted', status='old')
    read (fd) header
    count = header(3)
    allocate(raw(count), shard(count))
    read (fd) raw
    close (fd)
    shard = iand(int(raw, c_int32_t), 65535)  ! uint16 tokens
    slices = (count - 1) / (b * t)
    do k = 0, int(steps * accum) - 1
      pos = mod(int(k, c_int64_t), slices) * b * t
      batch(1:b*t) = shard(pos + 1:pos + b * t)
      batch(b*t + 1:) = shard(pos + 2:pos + b * t + 1)
      call MPI_Send(batch, int(2 * b * t), MPI_INTEGER4, 1, 0, MPI_COMM_WORLD, ierr)
    end do
  else if (rank == 1) then
    if (zt_trainer_create_f(trim(config) // c_null_char, int(group, c_int32_t), trainer) /= ZT_OK) then
      print '(a)', 'zt_trainer_create_f: ' // zt_last_error()
      call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
    end if
    do k = 1, int(steps * accum)
      call MPI_Recv(batch, int(2 * b * t), MPI_INTEGER4, 0, 0, MPI_COMM_WORLD, status, ierr)
      if (zt_trainer_step(trainer, batch(1:b*t), batch(b*t + 1:), b, t, result) /= ZT_OK) then
        print '(a)', 'zt_trainer_step: ' // zt_last_error()
        call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
      end if
      if (result%stepped == 1) print '(a, i0, a, es25.17)', 'step ', result%step, ' loss ', result%loss
    end do
    if (zt_trainer_save(trainer, trim(checkpoint) // c_null_char) /= ZT_OK) print '(a)', zt_last_error()
    if (zt_trainer_destroy(trainer) /= ZT_OK) print '(a)', zt_last_error()
  end if
  call MPI_Comm_free(group, ierr)
  call MPI_Finalize(ierr)
end program
