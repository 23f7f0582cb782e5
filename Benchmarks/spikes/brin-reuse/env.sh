export PSQL="psql -h /tmp/hD -p 43432 -U postgres -X -v ON_ERROR_STOP=1"
export T0="2024-01-01 00:00:00+00"
