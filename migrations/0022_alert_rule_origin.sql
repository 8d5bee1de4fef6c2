-- Alert rules written in a source file (issue 18): applying the file reconciles them as a set,
-- and leaves the rules made by the CLI or the API (origin NULL) alone.
--
-- file_key names a file rule across applies: 'name:<its name>' when the file names it (so a
-- change updates it in place, keeping its id and its debounce history), else 'spec:<md5 of
-- its content>' (a changed unnamed rule is a new rule).
ALTER TABLE alert_rules ADD COLUMN origin text;
ALTER TABLE alert_rules ADD COLUMN file_key text;
ALTER TABLE alert_rules ADD CONSTRAINT alert_rules_file_key
    CHECK ((origin IS NULL) = (file_key IS NULL));
CREATE UNIQUE INDEX alert_rules_file_rule ON alert_rules (source, file_key)
    WHERE origin = 'source';
