-- Smart and constructed inventories saved (spec part A 2.1, 4.12; part B 7.3): an inventory of
-- kind `smart` (a host filter) or `constructed` (the constructed plugin's options) is composed over
-- `inputs`, stored inventories of kind `static`, in order. It keeps no content of its own (`content`
-- is empty); `hosts` and `host_count` are those it reached when it was saved. It is resolved again
-- when a run starts (tools/ansible.ts). `inputs` has no foreign key: deleting an input still used
-- is refused by services/inventories.ts, and a run or launch meeting one gone fails or answers 409.
ALTER TABLE inventories DROP CONSTRAINT inventories_kind_check;
ALTER TABLE inventories ADD CONSTRAINT inventories_kind_check CHECK (kind IN ('static', 'smart', 'constructed'));
ALTER TABLE inventories
  ADD COLUMN inputs      text[] NOT NULL DEFAULT '{}',
  ADD COLUMN host_filter text,
  ADD COLUMN source_vars jsonb,
  ADD CONSTRAINT inventories_composed_fields CHECK (
    (kind = 'static' AND inputs = '{}' AND host_filter IS NULL AND source_vars IS NULL)
    OR (kind = 'smart' AND host_filter IS NOT NULL AND source_vars IS NULL)
    OR (kind = 'constructed' AND host_filter IS NULL)
  );
CREATE INDEX inventories_inputs ON inventories USING gin (inputs) WHERE kind <> 'static';
