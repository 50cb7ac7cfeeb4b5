"""pslurm: a Slurm-style batch scheduler for GPU clusters."""

__version__ = "0.4.0"  # the release; pyproject.toml reads it (CHANGELOG.md says what each changed)
