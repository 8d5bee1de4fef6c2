-- The product's primary image as stored by the fetch pipeline: a content-addressed payload
-- reference (js:<sha256> or obj:<sha256>), fetched once per image URL and source.
ALTER TABLE products ADD COLUMN image_ref text;
