"""The results on disk: layout and atomic private writes (:mod:`.layout`), versioned documents
(:mod:`.schema`), ``run.json`` (:mod:`.run_record`) and ``campaign.json`` /
``testbed-<name>.json`` (:mod:`.campaign_record`)."""
