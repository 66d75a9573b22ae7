-- SQLite evaluates `x IN (a, b, c)` with three or more constants by building a temporary
-- b-tree of the list each time a statement runs, and a CHECK constraint is no exception: every
-- insert into the outbox (two per transfer) built one for its status, about a third of the
-- insert's instructions (callgrind), and so did every change of a hold's state. The same
-- constraints as comparisons cost a few instructions. Only the text of the constraints changes
-- and the rows already satisfy them, so the table definitions are edited in place, the
-- procedure SQLite documents for changing a CHECK constraint (lang_altertable.html, "Making
-- Other Kinds Of Table Schema Changes"): no table is copied, and the outbox's foreign key
-- from webhook_attempts stays as it is. `writable_schema = RESET` turns the edit off and makes
-- this connection read the definitions again (left with the old ones, a later ADD COLUMN on it
-- would splice the new column into the wrong place of the longer text); the table created and
-- dropped after it advances the schema cookie, so that every other connection does too.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(
    sql,
    'CHECK (status IN (''pending'', ''delivered'', ''dead_lettered''))',
    'CHECK (status = ''pending'' OR status = ''delivered'' OR status = ''dead_lettered'')'
)
WHERE type = 'table' AND name = 'outbox';
UPDATE sqlite_schema
SET sql = replace(
    sql,
    'CHECK (state IN (''pending'', ''settled'', ''released''))',
    'CHECK (state = ''pending'' OR state = ''settled'' OR state = ''released'')'
)
WHERE type = 'table' AND name = 'ledger_holds';
PRAGMA writable_schema = RESET;
CREATE TABLE schema_cookie_0024 (x INTEGER);
DROP TABLE schema_cookie_0024;
