"""The rules a group chooses from, each declared once with its traits: the queue policies, the
node selectors and the preemption modes.

Everything that names or tells apart the rules of a kind reads it here: the snapshot's and
GroupSpec's `Literal`s, the CLI's help, the share report (whether a policy scores users), the
simulator (which of its shortcuts a rule allows) and the planner itself. A rule added here and in
the CHECK of its column (`sql/`, checked by tests/core/test_rules.py) is known everywhere; a trait
wrong for it is the one thing left to get right.
"""

from __future__ import annotations

from dataclasses import dataclass

from job.core.planner.policies import Order, fair, fifo, lifo
from job.core.planner.selectors import Concentrated, Dispersed, Legacy, NoState, RoundRobin, Selector
from job.core.usage import usage_share


@dataclass(frozen=True, slots=True)
class PolicyRule:
    name: str
    order: Order
    help: str
    # The user with the lowest score (picture.user_score) goes next: the share report shows it.
    scores_users: bool = False
    # The score counts past usage (fair share's U), charged over time with the group's half life.
    remembers_usage: bool = False
    # A user's jobs come in the user's own fifo order (class, priority, age): the simulator may
    # then leave out a user's jobs of a shape past the first k that can be placed.
    keeps_user_order: bool = True
    # Every job comes in one fifo order (class, priority, age), whoever its user: the simulator may
    # then leave out the jobs of a shape past the first k of all users' that can be placed.
    keeps_global_order: bool = False


@dataclass(frozen=True, slots=True)
class SelectorRule:
    name: str
    kind: type[Selector]
    help: str
    # It counts positions among all the group's nodes (round-robin's index): the simulator may not
    # leave out a full node.
    positional: bool = False

    @property
    def has_state(self) -> bool:
        """Whether it keeps a state between ticks, in the group state under `state_name`."""
        return self.kind.State is not NoState

    @property
    def state_name(self) -> str:
        return f"selector.{self.name}"


@dataclass(frozen=True, slots=True)
class PreemptionRule:
    name: str
    help: str
    # A waiting job may stop running jobs of a lower, preemptible class.
    preempts: bool = False
    # Also, within a class, a job of a user below another's score may stop that user's jobs.
    reclaims: bool = False


def _by_name(*rules):
    return {rule.name: rule for rule in rules}


POLICIES: dict[str, PolicyRule] = _by_name(
    PolicyRule("fifo", fifo, "higher priority first, then oldest first", keeps_global_order=True),
    PolicyRule("lifo", lifo, "higher priority first, then newest first", keeps_user_order=False),
    PolicyRule("drf", fair, "the user with the lowest dominant share over shares first", scores_users=True),
    PolicyRule("fairshare", fair, "as drf, with the user's decayed past usage added to its share", scores_users=True,
               remembers_usage=True),
)

SELECTORS: dict[str, SelectorRule] = _by_name(
    SelectorRule("legacy", Legacy, "fewest extra resources, then the largest node"),
    SelectorRule("concentrated", Concentrated, "the least free capacity that fits (pack)"),
    SelectorRule("dispersed", Dispersed, "the most free capacity (spread)"),
    SelectorRule("roundrobin", RoundRobin, "the next node in turn that fits", positional=True),
)

PREEMPTIONS: dict[str, PreemptionRule] = _by_name(
    PreemptionRule("off", "never stop a running job"),
    PreemptionRule("priority", "stop lower classes for higher ones", preempts=True),
    PreemptionRule("fairshare", "also reclaim for users below their share", preempts=True, reclaims=True),
)

POLICY_NAMES = tuple(POLICIES)
SELECTOR_NAMES = tuple(SELECTORS)
PREEMPTION_NAMES = tuple(PREEMPTIONS)


def memory(policy: str, usage: float, half_life_s: float) -> float:
    """The part of a user's score that comes from the past: only a policy that remembers usage has one."""
    return usage_share(usage, half_life_s) if POLICIES[policy].remembers_usage else 0.0


def listed(names: tuple[str, ...]) -> str:
    """`fifo, lifo, drf or fairshare`: names for people, in the registry's order."""
    return f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else "".join(names)
