"""The congestion-control algorithms the experiment scripts offer as --cc
(cc-experiment, fct-experiment, multipath-experiment), in the registry's
order. The registry in src/cc is the source: `droce-cc-replay --list`
prints it, and tests/cc_scenarios/cc_algorithms_test.py fails when this
list and the registry differ.
"""
ALGORITHMS = ("none", "dcqcn", "timely", "hpcc", "swift")
