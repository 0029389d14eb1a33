//! `server.cpus` and `ingest.background_cpus`: the cores the gateway's threads, or those of the
//! work behind its inbox, may run on, written as Linux writes a CPU list
//! (`taskset -c`, `/proc/<pid>/status`'s `Cpus_allowed_list`): "1", "0,2-3". Empty: every core
//! the process is given.

use serde::{Deserialize, Serialize};

/// The largest core number accepted: a `cpu_set_t` holds 1,024.
const MAX_CORE: usize = 1_023;

/// A set of core numbers, in order, each once. Empty: no restriction.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CoreList(Vec<usize>);

impl CoreList {
    /// The cores, in order; empty when none are named.
    pub fn cores(&self) -> &[usize] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl TryFrom<String> for CoreList {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        let mut cores = vec![];
        for part in text.split(',').map(str::trim).filter(|part| !part.is_empty()) {
            let (first, last) = match part.split_once('-') {
                Some((first, last)) => (core(first)?, core(last)?),
                None => (core(part)?, core(part)?),
            };
            if first > last {
                return Err(format!("`{part}`: a range runs from the lower core to the higher"));
            }
            cores.extend(first..=last);
        }
        cores.sort_unstable();
        cores.dedup();
        Ok(Self(cores))
    }
}

fn core(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(core) if core <= MAX_CORE => Ok(core),
        _ => Err(format!("`{text}` is not a core number (0 to {MAX_CORE}); write a list such as \"1\" or \"0,2-3\"")),
    }
}

impl From<CoreList> for String {
    fn from(list: CoreList) -> String {
        list.to_string()
    }
}

impl std::fmt::Display for CoreList {
    /// Written back as ranges, as Linux writes a CPU list.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts: Vec<String> = vec![];
        let mut cores = self.0.iter().copied().peekable();
        while let Some(first) = cores.next() {
            let mut last = first;
            while cores.peek() == Some(&(last + 1)) {
                last = cores.next().unwrap_or(last);
            }
            parts.push(if first == last { first.to_string() } else { format!("{first}-{last}") });
        }
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::CoreList;

    fn list(text: &str) -> Result<Vec<usize>, String> {
        CoreList::try_from(text.to_owned()).map(|list| list.cores().to_vec())
    }

    #[test]
    fn a_list_reads_as_linux_writes_it_and_is_written_back_the_same() {
        assert_eq!(list(""), Ok(vec![]));
        assert_eq!(list("1"), Ok(vec![1]));
        assert_eq!(list("0,2-3"), Ok(vec![0, 2, 3]));
        assert_eq!(list(" 3, 1-2 ,2 "), Ok(vec![1, 2, 3]));
        let written: String = CoreList::try_from("0,2-4,7,8".to_owned()).expect("a list").into();
        assert_eq!(written, "0,2-4,7-8");
    }

    #[test]
    fn anything_else_is_refused_with_the_form_it_takes() {
        for wrong in ["one", "-1", "3-1", "1-", "1024", "0;1"] {
            let refused = list(wrong).expect_err(wrong);
            assert!(refused.contains('`'), "{wrong}: {refused}");
        }
    }
}
