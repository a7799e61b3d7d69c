"""Learning-rate schedules: the schedule calls and what they do over a run."""
