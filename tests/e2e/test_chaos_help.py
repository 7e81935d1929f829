"""`cronwire chaos --help` names every fault --faults accepts (it once omitted
failover), from the real command."""

from __future__ import annotations

import re

from cronwire.chaos.faults import FAULTS
from tests.support.processes import clean_env, run_cli


def test_the_faults_help_names_every_fault() -> None:
    shown = run_cli("chaos", "--help", env=clean_env())
    assert shown.returncode == 0, shown.stderr
    # argparse wraps the help at spaces and hyphens: undo both before looking for names.
    text = re.sub(r"-\s+", "-", " ".join(shown.stdout.split()))
    listed = text[text.index("--faults FAULTS"):]
    missing = [name for name in FAULTS if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])",
                                                        listed)]
    assert not missing, f"chaos --faults help omits {missing}"
