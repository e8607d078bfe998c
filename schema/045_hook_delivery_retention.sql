-- --hook-delivery-retention: each server's sweeper deletes webhook push deliveries settled longer
-- ago than the retention (services/schedules/hook-deliveries.ts), a batch each pass; this index
-- finds them without reading the pending ones or the whole table.
CREATE INDEX hook_deliveries_settled ON hook_deliveries (settled_at) WHERE state <> 'pending';
