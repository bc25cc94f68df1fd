-- Outbox rows are updated several times each (leased, then marked published or backed off).
-- Free space in each page lets those updates stay on the page (heap-only tuples), which keeps
-- the relay's claim-and-mark statements cheap under a backlog.
ALTER TABLE outbox SET (fillfactor = 50);
