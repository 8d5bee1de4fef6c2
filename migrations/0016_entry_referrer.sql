-- The page that linked an entry: the fetcher sends it as Referer (with Sec-Fetch-Site computed
-- from it), as a browser following the link would. NULL for seeds, searches and sitemaps:
-- those are typed into the address bar.
ALTER TABLE entries ADD COLUMN referrer text;
