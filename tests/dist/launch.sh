# Sourced by the dist test scripts (after they set $bin): starting $bin on N ranks in the
# background, waiting for a file it writes, and signalling its ranks the way Slurm does.

# launch NP ARGS...: $bin on NP ranks (NP = 1: no mpirun), in the background; its pid (mpirun's)
# goes to $launched. BRAID_CKPT_FAULT and BRAID_COLLECTIVE_TIMEOUT_S reach the ranks when set.
launch() {
  local np=$1 exports=() name
  shift
  if [ "$np" -eq 1 ]; then
    "$bin" "$@" &
  else
    for name in BRAID_CKPT_FAULT BRAID_COLLECTIVE_TIMEOUT_S; do
      [ -n "${!name+set}" ] && exports+=(-x "$name")
    done
    mpirun -np "$np" --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 \
      "${exports[@]}" "$bin" "$@" &
  fi
  launched=$!
}

# wait_for FILE PID: until FILE exists (status 0), or PID has ended or 30 s passed (status 1).
wait_for() {
  for _ in $(seq 1 3000); do
    [ -e "$1" ] && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.01
  done
  return 1
}

# terminate_ranks NP PID: SIGTERM to every rank of the job launch started, as Slurm sends it
# (mpirun itself would kill its ranks a second after passing SIGTERM on).
terminate_ranks() {
  if [ "$1" -eq 1 ]; then
    kill -TERM "$2" 2>/dev/null
  else
    pkill -TERM -P "$2"
  fi
}
