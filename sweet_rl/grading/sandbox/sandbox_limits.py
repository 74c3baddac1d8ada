"""The sandbox's time bounds, shared by the worker (which loads this file by path) and the
grading process (which imports it from the package). No imports: both ways must work.

Every wait of the worker has a deadline made of these numbers, so one test costs at most its
own limit plus :data:`TEST_OVERHEAD`, and one job at most ``tests x (timeout +
TEST_OVERHEAD)`` (:func:`job_bound`) whatever its code does:

- a fresh child has ``SETUP_LIMIT`` seconds from the fork request to its begin packet (the
  fork server's reply, the job's header, confining, compiling the answer);
- a test has its limit plus ``GRACE`` from the moment its expression is written, plus
  ``ENCODE_GRACE`` once the child said its value is computed (the ``E`` packet, taken once
  per test: more of them move nothing);
- a child that overran or died is killed and waited for at most ``EXIT_WAIT`` seconds.
"""

SETUP_LIMIT = 5.0
GRACE = 0.5
# a 14 MB record took 1.2-1.7 s to encode and send on a busy 2-core machine; the kernel's
# receive times still bound the whole test (sandbox_records.kernel_tolerance)
ENCODE_GRACE = 3.0
EXIT_WAIT = 1.0
TEST_OVERHEAD = SETUP_LIMIT + GRACE + ENCODE_GRACE + EXIT_WAIT
CONTROL_LIMIT = 2.0  # seconds for one round trip with the fork server (counted in SETUP_LIMIT)
# seconds a fork server holding a job's packages may take to import them (counted in
# SETUP_LIMIT, which leaves the rest for the fork, confining and compiling)
PRELOAD_LIMIT = 2.5


def job_bound(tests, timeout):
    """Seconds one job of ``tests`` tests with ``timeout`` each may take in the worker."""
    return tests * (timeout + TEST_OVERHEAD)
