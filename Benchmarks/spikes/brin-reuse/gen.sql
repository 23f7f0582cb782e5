CREATE FUNCTION gen(lo bigint, hi bigint) RETURNS TABLE (at timestamptz, launch_hash text, iss text, sub text, fhir_user text, patient text,
  method text, path text, upstream_status int, bytes bigint, text_escaped boolean, recorded_at timestamptz, broken_off boolean)
LANGUAGE sql IMMUTABLE AS $$
  SELECT timestamptz '2024-01-01 00:00:00+00' + (n/100) * interval '259.2 s' - (n%7) * interval '1 s',
         md5(n::text) || md5((n*7)::text), 'https://ehr.example.org/fhir/r4', 'user-' || (n%500), 'Practitioner/' || (n%500),
         'Patient/' || (n%20000), 'GET', '/Patient/' || (n%20000) || '/Observation?category=vital-signs&_count=50',
         200, n%100000, false, timestamptz '2024-01-01 00:00:00+00' + (n/100) * interval '259.2 s', false
  FROM generate_series(lo, hi) n ORDER BY n $$;
