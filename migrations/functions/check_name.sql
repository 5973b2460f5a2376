-- check_name: p_name may be a scope name or node id (p_what says which), or
-- PLF11: 1 to 200 bytes, no control character (C0, DEL, C1), no line or
-- paragraph separator, no text-direction control and no invisible format
-- character (the Go engine's ValidateScopeName, in SQL). A node id also holds no
-- quote or backslash: it appears in commands a hint suggests.
CREATE OR REPLACE FUNCTION pgleader.check_name(p_what text, p_name text)
 RETURNS void
 LANGUAGE plpgsql
 IMMUTABLE
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_rule text;
BEGIN
  v_rule := CASE
    WHEN p_name IS NULL OR p_name = '' THEN 'it must not be empty'
    WHEN octet_length(p_name) > 200 THEN format('it is %s bytes, longer than the limit of 200', octet_length(p_name))
    WHEN p_name ~ '[\u0001-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]'
      OR p_name ~ '[\U000e0000-\U000e007f]'
      THEN 'it holds a control, direction or invisible format character'
    WHEN p_what = 'node id' AND p_name ~ '[''"`\\]' THEN 'a node id holds no quote or backslash'
  END;
  IF v_rule IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF11',
      MESSAGE = format('pgleader: %s %s refused: %s', p_what,
                       quote_literal(left(regexp_replace(regexp_replace(coalesce(p_name, ''),
                         '[\u0001-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]', '?', 'g'),
                         '[\U000e0000-\U000e007f]', '?', 'g'), 80)), v_rule),
      HINT = 'use printable characters only (letters, digits, punctuation other than quotes, symbols, spaces)';
  END IF;
END $function$;
