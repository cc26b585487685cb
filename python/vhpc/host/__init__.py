"""What every face shares about the host at hand: where ranks run, how, and what it costs.

placement.py confines ranks (own cores, one core, cgroup caps, time-sliced groups),
domains.py emulates VMs with cgroups (cpuset, weight, cap, freezer), timeslice.py
is the slicer that freezes and thaws domains in turn, cgroups.py creates and kills
groups by membership, process.py runs and kills process trees, leftovers.py and
signals.py make sure a dead or stopped run leaves nothing behind, load.py reads the
machine's load and steal time, and profile.py is the host profile `vhpc calibrate`
writes and the simulator reads.
"""
