"""zshard's exceptions: one hierarchy with ZshardError at its root.

Every error the package raises on its own account is a ZshardError (a
RuntimeError). WorkerLost, the worker daemon gone, is also a
ConnectionError, so that code which handles lost connections in general
catches it too.
"""

__all__ = ["JobFailed", "WorkerLost", "ZshardError"]


class ZshardError(RuntimeError):
    """The daemon refused the trainer or broke the protocol, or the package
    was used wrongly; the message says why."""


class WorkerLost(ZshardError, ConnectionError):
    """The worker daemon went away (it died or closed the trainer socket).

    A ZshardError and a ConnectionError: code that catches ZshardError to
    handle a refusal must let WorkerLost through first if it should end
    the training loop (`except WorkerLost: raise`)."""


class JobFailed(ZshardError):
    """The coordinator ended the job as failed (a range of the optimizer
    state lost with no copy and no checkpoint, or the job found it cannot
    go on); the message is the coordinator's reason. The daemon is alive
    and exits 1 too: unlike WorkerLost, nothing will resume this job."""
