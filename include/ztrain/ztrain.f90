! Fortran bindings of ztrain's embedding API (ztrain.h), through iso_c_binding. Compile this file
! with the program that uses it (mpifort ztrain.f90 prog.f90 $(pkg-config --libs ztrain)).
! Strings passed in end with c_null_char; the communicator is a Fortran handle (MPI_COMM_WORLD,
! or one from MPI_Comm_split), taken by zt_trainer_create_f. Statuses are ztrain.h's zt_status.
module ztrain
  use iso_c_binding
  implicit none

  integer(c_int), parameter :: ZT_OK = 0

  type, bind(c) :: zt_step_result
    integer(c_int32_t) :: stepped
    integer(c_int32_t) :: step
    real(c_double) :: loss
    real(c_double) :: lr
    real(c_double) :: grad_norm
    real(c_double) :: ms
    real(c_double) :: tokens_per_s
  end type

  interface
    integer(c_int) function zt_trainer_create_f(config, fortran_comm, t) bind(c, name="zt_trainer_create_f")
      import :: c_int, c_int32_t, c_char, c_ptr
      character(kind=c_char), dimension(*), intent(in) :: config
      integer(c_int32_t), value :: fortran_comm
      type(c_ptr), intent(out) :: t
    end function

    integer(c_int) function zt_trainer_step(t, tokens, targets, b, tt, result) bind(c, name="zt_trainer_step")
      import :: c_int, c_int32_t, c_int64_t, c_ptr, zt_step_result
      type(c_ptr), value :: t
      integer(c_int32_t), dimension(*), intent(in) :: tokens, targets
      integer(c_int64_t), value :: b, tt
      type(zt_step_result), intent(out) :: result
    end function

    integer(c_int) function zt_trainer_save(t, dir) bind(c, name="zt_trainer_save")
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: t
      character(kind=c_char), dimension(*), intent(in) :: dir
    end function

    integer(c_int) function zt_trainer_destroy(t) bind(c, name="zt_trainer_destroy")
      import :: c_int, c_ptr
      type(c_ptr), value :: t
    end function

    type(c_ptr) function zt_last_error_c() bind(c, name="zt_last_error")
      import :: c_ptr
    end function
  end interface

contains

  ! zt_last_error() as a Fortran string.
  function zt_last_error() result(message)
    character(len=:), allocatable :: message
    character(kind=c_char), pointer :: chars(:)
    integer :: n
    interface
      integer(c_size_t) function strlen(s) bind(c, name="strlen")
        import :: c_size_t, c_ptr
        type(c_ptr), value :: s
      end function
    end interface
    type(c_ptr) :: p
    p = zt_last_error_c()
    n = int(strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: message)
    message = transfer(chars(1:n), message)
  end function
end module ztrain
