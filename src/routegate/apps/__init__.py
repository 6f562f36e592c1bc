"""Applications built on routegate's core: the triage demo and the support desk."""
