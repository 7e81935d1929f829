-- Client certificates (mTLS, ADR 0061): a target may carry
-- tls = {client_certificate, client_key (sealed), client_certificate_subject,
-- client_certificate_not_after}. The fleet gauge of the earliest expiry reads the minimum
-- of not_after (UTC text of one fixed shape, so text order is time order) from this index,
-- which holds only schedules that have a certificate.
CREATE INDEX schedule_client_certificate_expiry_idx
    ON schedule ((target #>> '{tls,client_certificate_not_after}'))
    WHERE status <> 'deleted' AND target ? 'tls';
