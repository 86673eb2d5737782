"""Run orchestration: which cluster a run checks, bringing it up and down (sim, kind, node,
operator install), the pytest command of a run (the run plan), matrix runs and certification.

The only layer that starts environments, and so the only one that imports ``conformance.sim``.
"""
