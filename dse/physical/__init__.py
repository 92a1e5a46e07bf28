"""Physical validation: real collective traffic between ranks (validate, replay_ray).

VALIDATION_FILE lives here, apart from validate.py, so the reports that read it do not load the
replay machinery (simulators.rdma) to learn a file name."""

VALIDATION_FILE = "validation.csv"  # what `dse validate` writes into a study directory

__all__ = ["VALIDATION_FILE"]
