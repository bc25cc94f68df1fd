-- Traces (issue 37): the W3C `traceparent` of a job's latest run while the Worker's telemetry is
-- on, so the events recorded for the job outside its run (a cancel or delete through the
-- control API, the deletion's end) carry its trace as `ce-traceparent`. NULL with telemetry
-- off: those events stay exactly as they were.
ALTER TABLE jobs ADD COLUMN traceparent text
    CHECK (traceparent IS NULL OR traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');
