"""Runs one command as N processes of a multi-process JAX run on this machine.

For testing and for a workstation: what a SLURM job or a TPU pod does on many hosts, here with
a free local port as the coordinator and each process simulating `--devices_per_process` CPU
devices. Each child gets REALM_BENCH_COORDINATOR_ADDRESS / _NUM_PROCESSES / _PROCESS_ID, which
`distributed.initialize` reads (so `realm-bench train` needs no extra flag), and its output
prefixed with `[pN]`. If any process fails the others are stopped (a collective would otherwise
wait for it until the coordinator's timeout); the exit status is the first failure's.

  python -m realm_bench.launch_local --processes 2 --devices_per_process 4 -- \\
      realm-bench train --gin_file runs/ict.gin --gin.RUN_DIR="'runs/ict_2p'" ...
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time
from typing import Mapping, Sequence

from realm_bench import distributed, validate
from realm_bench.errors import InputError


def free_port() -> int:
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _relay(stream, prefix: str, out) -> None:
  for line in iter(stream.readline, ""):
    out.write(prefix + line)
    out.flush()


def launch(*, command: Sequence[str], processes: int, devices_per_process: int | None = None,
           env: Mapping[str, str] | None = None, timeout: float | None = None,
           port: int | None = None, out=None) -> int:
  """Runs `command` as `processes` cooperating processes; returns the first nonzero status
  (0 when all succeeded). `devices_per_process` simulates that many CPU devices in each."""
  validate.whole("launch", "processes", processes, minimum=1)
  validate.whole("launch", "devices_per_process", devices_per_process, minimum=1,
                 optional=True)
  if not command:
    raise InputError("no command to run (put it after `--`)", field="command")
  out = sys.stdout if out is None else out
  address = f"127.0.0.1:{port or free_port()}"
  children, relays = [], []
  for i in range(processes):
    child_env = dict(os.environ if env is None else env)
    if devices_per_process is not None:
      child_env.update(distributed.cpu_device_flags(devices_per_process))
    child_env.update({distributed.ENV_COORDINATOR: address,
                      distributed.ENV_NUM_PROCESSES: str(processes),
                      distributed.ENV_PROCESS_ID: str(i)})
    proc = subprocess.Popen(list(command), env=child_env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    relay = threading.Thread(target=_relay, args=(proc.stdout, f"[p{i}] ", out), daemon=True)
    relay.start()
    children.append(proc)
    relays.append(relay)
  deadline = None if timeout is None else time.monotonic() + timeout
  status = 0
  try:
    while any(p.poll() is None for p in children):
      failed = [p.returncode for p in children if p.returncode not in (None, 0)]
      if failed or (deadline is not None and time.monotonic() > deadline):
        status = failed[0] if failed else 124
        break
      time.sleep(0.1)
    else:
      status = next((p.returncode for p in children if p.returncode), 0)
  finally:
    for p in children:
      if p.poll() is None:
        p.terminate()
    for p in children:
      try:
        p.wait(timeout=10)
      except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    for relay in relays:
      relay.join(timeout=5)
  return status


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(
      prog="python -m realm_bench.launch_local",
      description="Run a command as N local processes of one multi-process JAX run.")
  parser.add_argument("--processes", type=int, default=2)
  parser.add_argument("--devices_per_process", type=int, default=None,
                      help="simulate this many CPU devices in each process (default: the "
                           "backend's own devices)")
  parser.add_argument("--timeout", type=float, default=None, help="seconds before all stop")
  parser.add_argument("command", nargs=argparse.REMAINDER,
                      help="the command, after `--`")
  args = parser.parse_args(argv)
  command = args.command[1:] if args.command[:1] == ["--"] else args.command
  try:
    return launch(command=command, processes=args.processes,
                  devices_per_process=args.devices_per_process, timeout=args.timeout)
  except InputError as e:
    print(f"launch_local: {e}", file=sys.stderr)
    return 2


if __name__ == "__main__":
  sys.exit(main())
