//! Reading `INFO` replies, for the kit and for every test and benchmark that asks a server.

/// The value of `field:value` in an `INFO` reply.
pub fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .map(str::trim)
}

/// One count from a command's line in `INFO commandstats`, such as
/// `command_stat(&info, "throttle.take", "calls")`; `None` while the command has not run.
pub fn command_stat(info: &str, command: &str, stat: &str) -> Option<u64> {
    command_stat_text(info, command, stat)?.parse().ok()
}

/// One field of a command's line in `INFO commandstats` as the server wrote it, for the
/// ones that are not counts: `command_stat_text(&info, "set", "usec_per_call")` is `"0.43"`.
pub fn command_stat_text<'a>(info: &'a str, command: &str, stat: &str) -> Option<&'a str> {
    info_field(info, &format!("cmdstat_{command}"))?
        .split(',')
        .find_map(|field| field.strip_prefix(stat)?.strip_prefix('='))
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "# Memory\r\nused_memory:1000\r\nused_memory_human:1000B\r\n\
        # Commandstats\r\ncmdstat_throttle.take:calls=40,usec=90,usec_per_call=2.25,\
        rejected_calls=1,failed_calls=0\r\ncmdstat_set:calls=7,usec=3,usec_per_call=0.43\r\n";

    #[test]
    fn fields() {
        assert_eq!(info_field(INFO, "used_memory"), Some("1000"));
        assert_eq!(info_field(INFO, "used_memory_peak"), None);
    }

    #[test]
    fn command_stats() {
        assert_eq!(command_stat(INFO, "throttle.take", "calls"), Some(40));
        assert_eq!(
            command_stat(INFO, "throttle.take", "rejected_calls"),
            Some(1)
        );
        assert_eq!(command_stat(INFO, "set", "calls"), Some(7));
        assert_eq!(command_stat(INFO, "incr", "calls"), None);
        assert_eq!(command_stat(INFO, "set", "usec_per_call"), None);
        assert_eq!(
            command_stat_text(INFO, "set", "usec_per_call"),
            Some("0.43")
        );
        assert_eq!(command_stat_text(INFO, "set", "usec"), Some("3"));
    }
}
