# The benchmark table from RESULT lines (tab-separated: RESULT, section, metric, value,
# notes, load): one markdown table per section, in first-seen order. Used by benches/run.sh
# and benches/runtimes.sh.
$1 != "RESULT" { next }
!($2 in rows) { order[++n] = $2; rows[$2] = "" }
{ rows[$2] = rows[$2] sprintf("| %s | %s | %s | %s |\n", $3, $4, $5, $6) }
END {
	for (i = 1; i <= n; i++) {
		printf "\n### %s\n\n| metric | value | notes | load (1/5/15 min) |\n|---|---|---|---|\n%s", order[i], rows[order[i]]
	}
}
