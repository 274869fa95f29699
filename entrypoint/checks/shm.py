"""Shared memory: /dev/shm against the message queues vLLM 0.33.0 puts there. Docker gives a
container 64 MiB; a server that needs more dies at engine start ("Insufficient space in /dev/shm").

Where vLLM 0.33.0 sizes them (vllm/distributed/device_communicators/shm_broadcast.py, a ring
buffer of (chunk bytes + 1 + readers) x chunks, created by the writer):
- the multiprocessing executor (v1/executor/multiproc_executor.py) broadcasts to its workers through
  one queue of VLLM_MQ_MAX_CHUNK_BYTES_MB (16) MiB x 10 chunks, read by every worker; each worker
  answers through its own MessageQueue(1, 1): the defaults, 24 MiB x 10 chunks;
- each tensor-parallel group of more than one rank broadcasts through 4 MiB x 6 chunks
  (distributed/parallel_state.py, use_message_queue_broadcaster).
The single-process executor ("uni"), vLLM's choice for one worker on CUDA, creates none of them;
the CPU platform always takes the multiprocessing executor. NCCL's own shared-memory transport
between tensor-parallel ranks comes on top and is not counted."""
from __future__ import annotations

import dataclasses
import math
import os

from contract.verdict import Result, failed, passed
from .model import gib

NAME = "shm"
SHM_PATH = "/dev/shm"
MIB = 2**20
MQ_CHUNK_ENV = "VLLM_MQ_MAX_CHUNK_BYTES_MB"
MQ_CHUNK_MB_DEFAULT = 16
BROADCAST_CHUNKS = 10
RESPONSE_CHUNK_BYTES = 24 * MIB
RESPONSE_CHUNKS = 10
TP_CHUNK_BYTES = 4 * MIB
TP_CHUNKS = 6
IN_PROCESS = ("uni", "external_launcher")  # executors without worker processes; "mp" and "ray" have queues

@dataclasses.dataclass(frozen=True)
class Parallel:
    tensor: int = 1
    pipeline: int = 1
    backend: str | None = None  # --distributed-executor-backend as given

    @property
    def workers(self) -> int:
        return self.tensor * self.pipeline

    def executor(self, cuda: bool) -> str:
        """The executor vLLM picks (config/parallel.py; platforms/cpu.py turns "uni" into "mp")."""
        chosen = self.backend or ("uni" if self.workers == 1 else "mp")
        return "mp" if chosen == "uni" and not cuda else chosen


def ring_bytes(chunk_bytes: int, chunks: int, readers: int) -> int:
    return (chunk_bytes + 1 + readers) * chunks


def shm_need(parallel: Parallel, executor: str, mq_chunk_mb: int = MQ_CHUNK_MB_DEFAULT) -> int:
    """Bytes of /dev/shm vLLM's message queues take for this parallel layout and executor."""
    if executor in IN_PROCESS:
        return 0
    workers = parallel.workers
    need = ring_bytes(mq_chunk_mb * MIB, BROADCAST_CHUNKS, workers)
    need += workers * ring_bytes(RESPONSE_CHUNK_BYTES, RESPONSE_CHUNKS, 1)
    if parallel.tensor > 1:
        need += parallel.pipeline * ring_bytes(TP_CHUNK_BYTES, TP_CHUNKS, parallel.tensor - 1)
    return need


def mq_chunk_mb(env) -> int:
    raw = (env.get(MQ_CHUNK_ENV) or "").strip()
    return int(raw) if raw.isdigit() else MQ_CHUNK_MB_DEFAULT


def shm_size_fix(need: int) -> str:
    size = f"{max(1, math.ceil(need / 2**30))}g"
    return (f"give the container a larger /dev/shm: docker run --shm-size {size} (or --ipc=host), "
            f"compose `shm_size: {size}`, Quadlet `ShmSize={size}`")


def check_shm(parallel: Parallel, executor: str, mq_chunk: int = MQ_CHUNK_MB_DEFAULT,
              shm_path: str = SHM_PATH) -> Result:
    need = shm_need(parallel, executor, mq_chunk)
    layout = f"{parallel.workers} worker(s), {executor} executor"
    try:
        vfs = os.statvfs(shm_path)
    except OSError as error:
        if need == 0:
            return passed(NAME, f"{shm_path} is absent ({error.strerror}); {layout} puts no message queue there")
        return failed(NAME, f"{shm_path} is not usable ({error.strerror}); vLLM needs {gib(need)} there "
                            f"for {layout}", shm_size_fix(need))
    free = vfs.f_bavail * vfs.f_frsize
    if free < need:
        return failed(NAME, f"{shm_path} has {free // MIB} MiB free, vLLM's message queues for {layout} "
                            f"need {math.ceil(need / MIB)} MiB (it dies at engine start)", shm_size_fix(need))
    return passed(NAME, f"{shm_path} has {free // MIB} MiB free; {layout} needs {math.ceil(need / MIB)} MiB")
