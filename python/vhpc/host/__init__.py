"""What every face shares about the host at hand: where ranks run and how.

placement.py confines ranks (own cores, one core, cgroup caps, time-sliced groups),
domains.py emulates VMs with cgroups (cpuset, weight, cap, freezer), timeslice.py
is the slicer that freezes and thaws domains in turn, process.py runs and kills
process trees, load.py reads the machine's load and steal time.
"""
