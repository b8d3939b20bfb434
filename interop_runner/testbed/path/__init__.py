"""Emulated network paths on a node (docs/paths.md): the tc/iptables commands of each backend
(:mod:`.rules`), the node that applies and removes them (:mod:`.node`), calibration
(:mod:`.calibrate`), an attempt's counters (:mod:`.counters`) and the delay line that
``node`` builds on the node from ``delayline.c`` (package data, read at run time)."""
