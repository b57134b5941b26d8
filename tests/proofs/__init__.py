"""The learning proofs' recipes and measurements, shared by their tests and by the scripts that
print their figures (`python -m tests.proofs.distillation`, `python -m tests.proofs.finetuning`).

Run as scripts, they use one thread per TensorFlow and OpenMP op, as tests/conftest.py sets for
the test session (set here before TensorFlow is imported), so that a script and a test compute
the same figures.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
