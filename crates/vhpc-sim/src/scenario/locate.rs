//! Which field a TOML error is about: the dotted path (`domains[1].vcpus`)
//! of the key, value or table header at the error's byte offset, found by
//! walking the document's spans.

use std::ops::Range;

use toml_edit::{ImDocument, Item, Table, Value};

/// The path of the field at byte `pos` of `text`, if the text parses as
/// TOML and some key, value or table header covers `pos`.
pub fn field_at(text: &str, pos: usize) -> Option<String> {
    let doc = ImDocument::parse(text).ok()?;
    in_table(doc.as_table(), "", pos)
}

fn covers(span: Option<Range<usize>>, pos: usize) -> bool {
    span.is_some_and(|s| s.contains(&pos))
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

fn in_table(table: &Table, prefix: &str, pos: usize) -> Option<String> {
    for (key, item) in table.iter() {
        let path = join(prefix, key);
        if covers(table.key(key).and_then(|k| k.span()), pos) {
            return Some(path);
        }
        if let Some(found) = in_item(item, &path, pos) {
            return Some(found);
        }
    }
    None
}

fn in_item(item: &Item, path: &str, pos: usize) -> Option<String> {
    match item {
        Item::Value(value) => in_value(value, path, pos),
        Item::Table(table) => in_table(table, path, pos)
            .or_else(|| covers(table.span(), pos).then(|| path.to_string())),
        Item::ArrayOfTables(tables) => tables.iter().enumerate().find_map(|(i, table)| {
            let path = format!("{path}[{i}]");
            in_table(table, &path, pos).or_else(|| covers(table.span(), pos).then_some(path))
        }),
        Item::None => None,
    }
}

fn in_value(value: &Value, path: &str, pos: usize) -> Option<String> {
    let inner = match value {
        Value::InlineTable(table) => table.iter().find_map(|(key, v)| {
            let path = join(path, key);
            if covers(table.key(key).and_then(|k| k.span()), pos) {
                return Some(path);
            }
            in_value(v, &path, pos)
        }),
        Value::Array(array) => array
            .iter()
            .enumerate()
            .find_map(|(i, v)| in_value(v, &format!("{path}[{i}]"), pos)),
        _ => None,
    };
    inner.or_else(|| covers(value.span(), pos).then(|| path.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "seed = 1\n[host]\ncores = \"two\"\n\n[[domains]]\nname = \"a\"\n\n\
                       [[domains]]\nname = \"b\"\nvcpu = 3\nsedf = { period_us = -1 }\npin = [[0], [9]]\n";

    fn at(needle: &str) -> Option<String> {
        field_at(DOC, DOC.find(needle).expect("needle in DOC"))
    }

    #[test]
    fn names_keys_values_and_headers() {
        assert_eq!(at("seed").as_deref(), Some("seed"));
        assert_eq!(at("\"two\"").as_deref(), Some("host.cores"));
        assert_eq!(at("[host]").as_deref(), Some("host"));
        assert_eq!(at("vcpu =").as_deref(), Some("domains[1].vcpu"));
        assert_eq!(at("-1").as_deref(), Some("domains[1].sedf.period_us"));
        assert_eq!(at("9]").as_deref(), Some("domains[1].pin[1][0]"));
        assert_eq!(at("\"a\"").as_deref(), Some("domains[0].name"));
    }

    #[test]
    fn nothing_for_blank_space_or_broken_toml() {
        assert_eq!(field_at(DOC, DOC.find("\n\n").unwrap() + 1), None);
        assert_eq!(field_at("[host\ncores = 1", 2), None);
    }
}
