"""The storage layer in one import (kept for the code that imports ``storage.store``).

The parts: :mod:`.layout` (paths, atomic private writes, the walk over records),
:mod:`.schema` (versioned documents and their upgrade steps), :mod:`.run_record`
(``run.json``) and :mod:`.campaign_record` (``campaign.json``, ``testbed-<name>.json``).
"""

from __future__ import annotations

from interop_runner.storage.campaign_record import (CAMPAIGN_SCHEMA, CAMPAIGN_SCHEMA_VERSION,
                                                    CampaignRecord, load_campaign_record,
                                                    new_campaign_record, read_campaign,
                                                    write_campaign)
from interop_runner.storage.layout import (PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, PRIVATE_UMASK,
                                           attempt_dir, iter_run_files, new_campaign_dir,
                                           next_attempt, private_mkdir, private_umask,
                                           repetition_dir, unrecorded_attempts, utc_now,
                                           write_json_atomic)
from interop_runner.storage.run_record import (HOST_KEYS, RUN_SCHEMA, RUN_SCHEMA_VERSION,
                                               STATUSES, RunRecord, Side, Status, load_run,
                                               read_run, stored_attempts, write_run)

SCHEMA_VERSION = RUN_SCHEMA_VERSION  # the run.json version (its historical name)

__all__ = [
    "CAMPAIGN_SCHEMA", "CAMPAIGN_SCHEMA_VERSION", "CampaignRecord", "HOST_KEYS",
    "PRIVATE_DIR_MODE", "PRIVATE_FILE_MODE", "PRIVATE_UMASK", "RUN_SCHEMA",
    "RUN_SCHEMA_VERSION", "RunRecord", "SCHEMA_VERSION", "STATUSES", "Side", "Status",
    "attempt_dir", "iter_run_files", "load_campaign_record", "load_run", "new_campaign_dir",
    "new_campaign_record", "next_attempt", "private_mkdir", "private_umask", "read_campaign",
    "read_run", "repetition_dir", "stored_attempts", "unrecorded_attempts", "utc_now",
    "write_campaign", "write_json_atomic", "write_run",
]
