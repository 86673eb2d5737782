"""Building blocks the suites share: node views, operand rollout, GPU pods, versions."""
