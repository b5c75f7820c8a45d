"""livetail.verify: Z3 theorems over the spec, the differential campaign, traces and the CLI.

Needs the ``verify`` extra (z3-solver, hypothesis, rich); ``livetail.spec`` does not.
"""
