"""Flow control's pure rules: the key a schedule counts under, the ranges each member
must lie in (refused by name), the stored document, and a PATCH merging the object."""

from __future__ import annotations

import math

import pytest

from cronwire.api.merge_patch import patched_spec
from cronwire.api.schemas_schedule_input import SchedulePatch
from cronwire.domain.errors import RuleViolation
from cronwire.domain.flow_control import (
    FlowControl,
    check_flow_control,
    default_burst,
    effective_key,
    flow_from_document,
    flow_to_document,
)
from cronwire.domain.model import Target
from cronwire.domain.schedules import ScheduleSpec


def test_the_key_defaults_to_the_targets_origin() -> None:
    assert effective_key(FlowControl(), "https://Example.com/hook?x=1") == "https://example.com:443"
    assert effective_key(FlowControl(key="billing"), "https://example.com/") == "billing"


@pytest.mark.parametrize(("flow", "field"), [
    (FlowControl(key=""), "flow_control.key"),
    (FlowControl(key="\t"), "flow_control.key"),
    (FlowControl(key="a\x7fb"), "flow_control.key"),
    (FlowControl(max_concurrency=0), "flow_control.max_concurrency"),
    (FlowControl(rate_per_second=math.inf), "flow_control.rate_per_second"),
    (FlowControl(rate_per_second=math.nan), "flow_control.rate_per_second"),
    (FlowControl(rate_per_second=10_001.0), "flow_control.rate_per_second"),
    (FlowControl(burst=2), "flow_control.burst"),
    (FlowControl(rate_per_second=1.0, burst=10_001), "flow_control.burst"),
])
def test_a_member_out_of_range_is_refused_by_name(flow: FlowControl, field: str) -> None:
    with pytest.raises(RuleViolation) as refused:
        check_flow_control(flow)
    assert refused.value.field == field


def test_limits_in_range_pass_and_the_document_round_trips() -> None:
    flow = FlowControl(key="k", max_concurrency=10_000, rate_per_second=0.5, burst=1)
    check_flow_control(flow)
    assert flow_from_document(flow_to_document(flow)) == flow
    assert flow_from_document(None) is None and flow_to_document(None) is None
    assert (default_burst(0.5), default_burst(20.0), default_burst(20.5)) == (1, 20, 21)


def test_a_patch_merges_flow_control_member_by_member() -> None:
    spec = ScheduleSpec(name="s", cron="* * * * *", target=Target(url="https://example.com/"),
                        flow_control=FlowControl(key="k", max_concurrency=5))
    merged = patched_spec(spec, SchedulePatch.model_validate(
        {"flow_control": {"rate_per_second": 2, "max_concurrency": None}}))
    assert merged.flow_control == FlowControl(key="k", rate_per_second=2.0)
    assert patched_spec(spec, SchedulePatch.model_validate(
        {"flow_control": None})).flow_control is None
    fresh = ScheduleSpec(name="s", cron="* * * * *", target=Target(url="https://example.com/"))
    assert patched_spec(fresh, SchedulePatch.model_validate(
        {"flow_control": {}})).flow_control == FlowControl()
