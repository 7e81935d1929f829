-- When a paused schedule was last resumed (ADR 0003's amendment of 2026-12-06). A resume
-- says how many missed runs it makes due at once, counted at the resume's instant; the
-- planner's pass that writes them comes a moment later, and judged the catch-up window
-- (and the misfire tolerance) at its own instant, so a minute boundary between the two
-- slid the window: one counted run dropped at its old end. The planner now judges a
-- resumed schedule's missed occurrences at this instant until it has planned past it.
ALTER TABLE schedule ADD COLUMN resumed_at timestamptz;
