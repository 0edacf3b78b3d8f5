"""Simulated time for federated learning: step-time distributions, speed profiles, arrivals, a seeded event
clock, FCFS client queues, timelines and their pictures, and training-free schedules (FAVAS/QuAFL, FedBuff, FedAvg,
GHBM's rounds, FedAST's shared client pool).
"""
from afl.sim.arrivals import ArrivalProcess, ConstantRate, PoissonArrivals, make_arrivals, rate_for_concurrency
from afl.sim.clock import Event, EventQueue
from afl.sim.counts import contact_steps_pmf, steps_completed_pmf, truncated_steps_stats
from afl.sim.distributions import (Constant, Exponential, HalfNormal, LogNormal, ShiftedExponential, StepTime,
                                   make_distribution)
from afl.sim.plot import plot_class_shares, plot_step_time_cdfs, plot_steps_histogram, plot_timeline
from afl.sim.pool import PoolSchedule, PoolTask, Update, simulate_pool_schedule
from afl.sim.queues import FCFSQueues
from afl.sim.schedule import (SAMPLINGS, ClientClock, Contact, RoundSampler, ScheduleResult, simulate_async_schedule,
                              simulate_arrival_schedule, simulate_buffered_schedule, simulate_rounds,
                              simulate_sync_schedule)
from afl.sim.speeds import FEDAST_MODEL_COSTS, SpeedProfile, class_counts, three_speed, two_speed
from afl.sim.timeline import Flush, Interval, Timeline

__all__ = [
    "ArrivalProcess", "ConstantRate", "PoissonArrivals", "make_arrivals", "rate_for_concurrency",
    "Event", "EventQueue",
    "contact_steps_pmf", "steps_completed_pmf", "truncated_steps_stats",
    "Constant", "Exponential", "HalfNormal", "LogNormal", "ShiftedExponential", "StepTime", "make_distribution",
    "plot_class_shares", "plot_step_time_cdfs", "plot_steps_histogram", "plot_timeline",
    "FCFSQueues", "PoolSchedule", "PoolTask", "Update", "simulate_pool_schedule",
    "ClientClock", "Contact", "ScheduleResult", "simulate_async_schedule", "simulate_buffered_schedule",
    "simulate_arrival_schedule",
    "simulate_sync_schedule", "simulate_rounds", "RoundSampler", "SAMPLINGS",
    "FEDAST_MODEL_COSTS", "SpeedProfile", "class_counts", "three_speed", "two_speed",
    "Flush", "Interval", "Timeline",
]
