-- One installation cannot act in another on the same server (docs/operations/roles-and-logins.md, "On a shared server").
--
-- Roles belong to the server: job_gateway is one role for every installation, and `token create`
-- in any of them makes it a member of that installation's users. What keeps installation A's
-- users apart from installation B's gateway login is the database: only the logins A's operator
-- grants CONNECT may connect to A's. PostgreSQL grants CONNECT and TEMPORARY to PUBLIC on every
-- new database; here they are taken back, from PUBLIC and from the shared group roles (whose
-- members are every installation's logins). A gateway login of B reaches A's users' roles only
-- through job_gateway, which is NOINHERIT: it holds none of their rights, CONNECT included.
--
-- Only the database's owner (or a superuser) may revoke: a migrating role that is neither, on a
-- database that others may still connect to, stops here with the statements its owner runs.

DO $connect$
DECLARE
    here text := current_database();
    owner oid := (SELECT datdba FROM pg_database WHERE datname = current_database());
    shared text[] := ARRAY['public', 'job_admin', 'job_scheduler', 'job_submitter', 'job_reader', 'job_gateway'];
BEGIN
    IF pg_has_role(owner, 'USAGE') THEN
        EXECUTE format('REVOKE CONNECT, TEMPORARY ON DATABASE %I FROM PUBLIC, job_admin, job_scheduler, '
                       'job_submitter, job_reader, job_gateway', here);
    ELSIF EXISTS (SELECT FROM unnest(shared) AS r (name)
                  WHERE has_database_privilege(r.name, here, 'CONNECT')
                     OR has_database_privilege(r.name, here, 'TEMPORARY')) THEN
        RAISE EXCEPTION 'roles of other installations may connect to database %: as its owner %, run '
                        '"REVOKE CONNECT, TEMPORARY ON DATABASE % FROM PUBLIC, %", then migrate again',
                        quote_ident(here), quote_ident(pg_get_userbyid(owner)), quote_ident(here),
                        array_to_string(shared[2:], ', ')
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END
$connect$;
