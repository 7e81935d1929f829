"""The ScheduleStore's schedules-as-code methods (get_by_key, apply), against Postgres and
the in-memory fake alike: the same plan and the same result from both; a dry run and an
unchanged apply write nothing; a refused plan writes nothing; keys are unique."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from cronwire.domain.apply_plan import ApplyPlan, Desired, plan_apply
from cronwire.domain.errors import NotFound, RuleViolation, StateConflict
from cronwire.domain.model import ScheduleStatus, Target
from cronwire.domain.schedules import ScheduleRecord, ScheduleSpec
from tests.support.worlds import STORES, URL, World, world_for

SECRET = "whsec_" + "C" * 32


def spec(key: str, cron: str = "0 * * * *", managed_by: str | None = "git") -> ScheduleSpec:
    return ScheduleSpec(name=key, cron=cron, target=Target(url=URL, headers={"x-token": "t"}),
                        key=key, managed_by=managed_by)


@pytest.fixture(params=STORES)
def world(request: pytest.FixtureRequest) -> World:
    return world_for(request)


def decider(desired: Sequence[Desired], *, prune: bool = False):  # type: ignore[no-untyped-def]
    async def decide(current: Sequence[ScheduleRecord], live: int) -> ApplyPlan:
        return plan_apply(current, desired, managed_by="git", prune=prune, live=live,
                          max_schedules=100, new_secret=lambda: SECRET)
    return decide


async def admit_all(plan: ApplyPlan) -> None:
    return None


async def _apply(world: World, tenant, desired, *, prune=False, dry_run=False,  # type: ignore[no-untyped-def]
                 admit=admit_all):
    return await world.schedules.apply(
        tenant, [d.key for d in desired], decider(desired, prune=prune), admit,
        prune_managed_by="git" if prune else None, dry_run=dry_run)


async def _everything(world: World, tenant) -> list[ScheduleRecord]:  # type: ignore[no-untyped-def]
    return list(await world.schedules.list(tenant, after=None, limit=100))


async def test_apply_creates_changes_prunes_and_leaves_the_rest(world: World) -> None:
    tenant = (await world.seed(0)).tenant_id  # one seeded schedule without a key
    first = [Desired(0, spec("a")), Desired(1, spec("b")), Desired(2, spec("c"), paused=True)]
    plan, made = await _apply(world, tenant, first)
    assert [c.desired.key for c in plan.created] == ["a", "b", "c"]
    assert made["c"].status is ScheduleStatus.PAUSED and made["a"].signing_secret == SECRET
    assert (await world.schedules.get_by_key(tenant, "a")).id == made["a"].id
    before = await _everything(world, tenant)
    plan, after = await _apply(world, tenant, first)
    assert not plan.changes_anything and len(plan.unchanged) == 3
    assert await _everything(world, tenant) == before
    second = [Desired(0, spec("a", cron="5 * * * *")), Desired(1, spec("b"))]
    plan, dry = await _apply(world, tenant, second, prune=True, dry_run=True)
    assert dry["a"].spec.cron == "0 * * * *"  # as read: a dry run changes nothing
    assert [r.spec.key for r in plan.deleted] == ["c"]
    assert [u.changes for u in plan.updated] == [{"cron": ["0 * * * *", "5 * * * *"]}]
    assert await _everything(world, tenant) == before
    plan, after = await _apply(world, tenant, second, prune=True)
    assert after["a"].spec.cron == "5 * * * *" and after["a"].id == made["a"].id
    assert after["a"].next_fire_at is not None and after["a"].next_fire_at.minute == 5
    with pytest.raises(NotFound):
        await world.schedules.get_by_key(tenant, "c")
    assert len(await _everything(world, tenant)) == 3  # a, b and the seeded one


async def test_a_refused_admission_writes_nothing(world: World) -> None:
    tenant = (await world.seed(0)).tenant_id
    before = await _everything(world, tenant)

    async def refuse(plan: ApplyPlan) -> None:
        raise RuleViolation("schedules[0].target.url", "refused")

    with pytest.raises(RuleViolation):
        await _apply(world, tenant, [Desired(0, spec("a"))], admit=refuse)
    assert await _everything(world, tenant) == before


async def test_a_key_is_unique_among_live_schedules(world: World) -> None:
    tenant = (await world.seed(0)).tenant_id
    one = await world.schedules.create(tenant, spec("k"), paused=False, signing_secret=SECRET,
                                       max_schedules=10)
    with pytest.raises(StateConflict):
        await world.schedules.create(tenant, spec("k"), paused=False, signing_secret=SECRET,
                                     max_schedules=10)
    other = await world.schedules.create(tenant, spec("other"), paused=False,
                                         signing_secret=SECRET, max_schedules=10)
    with pytest.raises(StateConflict):
        await world.schedules.update(tenant, other.id,
                                     lambda s: dataclasses.replace(s, key="k"))
    await world.schedules.delete(tenant, one.id)
    again = await world.schedules.create(tenant, spec("k"), paused=False,
                                         signing_secret=SECRET, max_schedules=10)
    assert (await world.schedules.get_by_key(tenant, "k")).id == again.id
