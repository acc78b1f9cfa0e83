"""Test-session settings.

The tests compile many tiny programs and run each a few times, so XLA's optimiser costs more
than it saves: compile them unoptimised. Subprocess tests that set XLA_FLAGS keep their own.
"""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
