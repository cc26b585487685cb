"""`vhpc reproduce`: the published studies' experiments rerun in the simulator, printed
beside the published figures, one module per study (s0.py: Xen, MPI busy-polling)."""
