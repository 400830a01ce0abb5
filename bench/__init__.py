"""WhisperWire benchmarks: latency, WER, compute and capacity over the real protocol."""

import os

# as the server's engine does (engine.one_blas_thread): keep numpy's OpenBLAS from spinning
# threads, so the offline reference cost is measured the same way as the server's
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
