//! SQL that users write against nested tables, rewritten into forms DataFusion plans.
//!
//! Two spellings the issue tracker's users reach for first do not plan on DataFusion 55:
//! - `user.plan`: `user` parses as the SQL keyword (`CURRENT_USER`), so field access on a
//!   column named `user` fails. A dotted access on the bare keyword can only mean the column.
//! - `FROM events CROSS JOIN unnest(tags)` (or `FROM events, unnest(tags)`): a lateral join
//!   DataFusion plans as an outer reference it cannot execute. It is the same rows as
//!   `FROM (SELECT *, unnest(tags) AS unnest FROM events) AS events`, which it can.
//!
//! - A struct field selected without an alias is named after the field (`plan`), as DuckDB
//!   names it, rather than DataFusion's `t.user[plan]`.
//! - `t = TIME '13:45:00'`: DataFusion types a TIME literal in nanoseconds and cannot compare
//!   it with a time column, which neve keeps in microseconds. A literal (`TIME 'x'`,
//!   `CAST('x' AS TIME)`, `'x'::TIME`) with at most 6 fractional digits is the same time in
//!   microseconds, and is cast to that.
//!
//! The rewrite works on the parsed statement, so the SQL text the user wrote is what errors
//! point into.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, AccessExpr, CastKind, DataType, Expr, FunctionArguments, Ident, Join,
    JoinConstraint, JoinOperator, Query, Select, SelectItem, SetExpr, Statement, TableFactor,
    TableWithJoins, TimezoneInfo, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// Rewrite `statement` in place; statements it does not apply to are left as they are.
pub fn rewrite(statement: &mut Statement) {
    let _ = statement.visit(&mut Rewriter);
}

struct Rewriter;

impl VisitorMut for Rewriter {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let mut renames = Vec::new();
        lateral_unnests(&mut query.body, &mut renames);
        if !renames.is_empty() {
            let _ = visit_expressions_mut(query, |e| {
                requalify(e, &renames);
                ControlFlow::<()>::Continue(())
            });
        }
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let SetExpr::Select(select) = query.body.as_mut() {
            field_names(select);
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        user_column(expr);
        time_literal(expr);
        ControlFlow::Continue(())
    }
}

/// `TIME '13:45:00'` → `arrow_cast('13:45:00', 'Time64(Microsecond)')`.
fn time_literal(expr: &mut Expr) {
    let is_time = |t: &DataType| matches!(t, DataType::Time(None, TimezoneInfo::None));
    let text = match expr {
        Expr::TypedString(ts) if is_time(&ts.data_type) => ts.value.clone().into_string(),
        Expr::Cast {
            kind: CastKind::Cast | CastKind::DoubleColon,
            expr: inner,
            data_type,
            format: None,
            ..
        } if is_time(data_type) => match inner.as_ref() {
            Expr::Value(v) => v.clone().into_string(),
            _ => None,
        },
        _ => None,
    };
    let Some(text) = text else {
        return;
    };
    let fraction = text.split_once('.').map_or(0, |(_, f)| f.trim_end().len());
    if fraction > 6 {
        return;
    }
    let sql = format!(
        "arrow_cast('{}', 'Time64(Microsecond)')",
        text.replace('\'', "''")
    );
    if let Ok(e) = Parser::new(&GenericDialect {})
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_expr())
    {
        *expr = e;
    }
}

/// `user.plan` → `"user".plan`.
fn user_column(expr: &mut Expr) {
    let Expr::CompoundFieldAccess { root, access_chain } = expr else {
        return;
    };
    let Expr::Function(f) = root.as_ref() else {
        return;
    };
    let keyword = f.name.0.len() == 1
        && matches!(f.args, FunctionArguments::None)
        && f.name.0[0]
            .as_ident()
            .is_some_and(|i| i.quote_style.is_none() && i.value.eq_ignore_ascii_case("user"));
    if !keyword {
        return;
    }
    let column = Ident::with_quote('"', "user");
    let dotted: Option<Vec<Ident>> = access_chain
        .iter()
        .map(|a| match a {
            AccessExpr::Dot(Expr::Identifier(i)) => Some(i.clone()),
            _ => None,
        })
        .collect();
    *expr = match dotted {
        Some(fields) => Expr::CompoundIdentifier(std::iter::once(column).chain(fields).collect()),
        None => Expr::CompoundFieldAccess {
            root: Box::new(Expr::Identifier(column)),
            access_chain: std::mem::take(access_chain),
        },
    };
}

/// `SELECT user.plan` → `SELECT user.plan AS plan`, when `user` is not a relation of the
/// select (then it is a column, and `plan` a field of it) and no other item has that name.
fn field_names(select: &mut Select) {
    let qualifiers: Vec<Ident> = select
        .from
        .iter()
        .flat_map(|f| std::iter::once(&f.relation).chain(f.joins.iter().map(|j| &j.relation)))
        .filter_map(qualifier)
        .collect();
    let is_field = |parts: &[Ident]| {
        let q = usize::from(qualifiers.iter().any(|q| same_ident(q, &parts[0])));
        parts.len() >= q + 2
    };
    let last = |e: &Expr| match e {
        Expr::CompoundIdentifier(p) => p.last().map(|i| i.value.to_lowercase()),
        Expr::Identifier(i) => Some(i.value.to_lowercase()),
        _ => None,
    };
    let mut names: Vec<Option<String>> = select
        .projection
        .iter()
        .map(|item| match item {
            SelectItem::UnnamedExpr(e) => last(e),
            SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.to_lowercase()),
            _ => None,
        })
        .collect();
    for i in 0..select.projection.len() {
        let SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) = &select.projection[i] else {
            continue;
        };
        let name = names[i].clone();
        let unique = names.iter().filter(|n| **n == name).count() == 1;
        if is_field(parts) && unique {
            let alias = parts
                .last()
                .cloned()
                .expect("compound identifiers have parts");
            let SelectItem::UnnamedExpr(expr) = std::mem::replace(
                &mut select.projection[i],
                SelectItem::Wildcard(Default::default()),
            ) else {
                unreachable!()
            };
            select.projection[i] = SelectItem::ExprWithAlias { expr, alias };
            names[i] = name;
        }
    }
}

/// A qualifier the rewrite removed (the unnest's alias) and the one its columns now have.
struct Rename {
    from: Ident,
    to: Option<Ident>,
}

fn lateral_unnests(body: &mut SetExpr, renames: &mut Vec<Rename>) {
    match body {
        SetExpr::Select(select) => {
            // `FROM t, unnest(t.c)`: the same as `FROM t CROSS JOIN unnest(t.c)`.
            let mut i = 1;
            while i < select.from.len() {
                if select.from[i].joins.is_empty() && is_lateral_unnest(&select.from[i].relation) {
                    let TableWithJoins { relation, .. } = select.from.remove(i);
                    select.from[i - 1].joins.push(Join {
                        relation,
                        global: false,
                        join_operator: JoinOperator::CrossJoin(JoinConstraint::None),
                    });
                } else {
                    i += 1;
                }
            }
            for from in &mut select.from {
                fold(from, renames);
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            lateral_unnests(left, renames);
            lateral_unnests(right, renames);
        }
        _ => {}
    }
}

/// Fold the unnests that directly follow the first relation into it, one derived table each.
fn fold(from: &mut TableWithJoins, renames: &mut Vec<Rename>) {
    while let Some(join) = from.joins.first() {
        let cross = match &join.join_operator {
            JoinOperator::CrossJoin(JoinConstraint::None) => true,
            JoinOperator::Join(c) | JoinOperator::Inner(c) => is_on_true(c),
            _ => false,
        };
        if !cross || !is_lateral_unnest(&join.relation) {
            return;
        }
        let join = from.joins.remove(0);
        let TableFactor::UNNEST {
            alias, array_exprs, ..
        } = join.relation
        else {
            unreachable!("is_lateral_unnest checked the factor")
        };
        let qualifier = qualifier(&from.relation);
        let names = column_names(alias.as_ref(), array_exprs.len());
        let items: Vec<String> = array_exprs
            .iter()
            .zip(&names)
            .map(|(e, n)| format!("unnest({e}) AS {n}"))
            .collect();
        let outer = qualifier
            .as_ref()
            .map(|q| format!(" AS {q}"))
            .unwrap_or_default();
        let sql = format!(
            "SELECT * FROM (SELECT *, {} FROM {}){outer}",
            items.join(", "),
            from.relation
        );
        let Some(relation) = derived(&sql) else {
            // Should not happen (the parts came from a parsed statement); leave the join
            // for DataFusion to explain.
            from.joins.insert(
                0,
                Join {
                    relation: TableFactor::UNNEST {
                        alias,
                        array_exprs,
                        with_offset: false,
                        with_offset_alias: None,
                        with_ordinality: false,
                    },
                    ..join
                },
            );
            return;
        };
        from.relation = relation;
        if let Some(a) = alias {
            renames.push(Rename {
                from: a.name,
                to: qualifier,
            });
        }
    }
}

/// How deep an expression may nest: each binary operator of a chain (`a OR b OR …`) is one
/// level of the tree DataFusion plans and evaluates by recursion, so a chain of thousands would
/// overflow a thread's stack and abort the process.
pub const MAX_EXPRESSION_DEPTH: usize = 256;

/// Refuse SQL whose expressions nest deeper than [`MAX_EXPRESSION_DEPTH`], before anything
/// recursive sees it. Counted on the tokens, without recursion, at each level (a parenthesis
/// or a CASE opens one): the logical operators (`AND`, `OR`) in a row, plus the other binary
/// operators (comparisons, arithmetic, `||`, `IS`, `LIKE`, `::`) since the last logical one,
/// as `a = 1 OR b = 2` nests one level per `OR` and `1 = 1 = 1` one per `=`. A comma, a clause
/// keyword or a CASE's `WHEN`/`THEN`/`ELSE` starts a new expression.
pub fn check_depth(sql: &str) -> crate::Result<()> {
    use datafusion::sql::sqlparser::keywords::Keyword;
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
    let Ok(tokens) = Tokenizer::new(&GenericDialect {}, sql).tokenize() else {
        return Ok(()); // the parser says what is wrong
    };
    /// One level: logical operators in a row, and other operators since the last of those.
    #[derive(Default)]
    struct Level {
        logical: usize,
        run: usize,
    }
    /// A new expression at this level: its operators no longer count.
    fn restart(top: &mut Level, open: &mut usize) {
        *open -= top.logical + top.run;
        *top = Level::default();
    }
    /// The end of a level (a parenthesis or a CASE).
    fn close(levels: &mut Vec<Level>, open: &mut usize) {
        if let Some(l) = levels.pop() {
            *open -= l.logical + l.run;
        }
    }
    let mut levels: Vec<Level> = vec![Level::default()];
    // The depth of the expression being read: every open level's operators, plus the levels.
    let mut open = 0usize;
    for t in &tokens {
        let nested = levels.len() > 1;
        let top = levels.last_mut().expect("level 0 is never closed");
        let other_op = matches!(
            t,
            Token::Plus
                | Token::Minus
                | Token::Mul
                | Token::Div
                | Token::Mod
                | Token::StringConcat
                | Token::Ampersand
                | Token::Pipe
                | Token::Caret
                | Token::Eq
                | Token::DoubleEq
                | Token::Neq
                | Token::Lt
                | Token::Gt
                | Token::LtEq
                | Token::GtEq
                | Token::DoubleColon
        ) || matches!(t, Token::Word(w) if matches!(w.keyword, Keyword::IS | Keyword::LIKE | Keyword::ILIKE));
        match t {
            _ if other_op => {
                top.run += 1;
                open += 1;
            }
            Token::LParen | Token::LBracket => levels.push(Level::default()),
            Token::RParen | Token::RBracket if nested => close(&mut levels, &mut open),
            Token::Comma => restart(top, &mut open),
            Token::Word(w) => match w.keyword {
                Keyword::AND | Keyword::OR => {
                    open -= top.run;
                    top.run = 0;
                    top.logical += 1;
                    open += 1;
                }
                // The chain around a CASE goes on after its END.
                Keyword::CASE => levels.push(Level::default()),
                Keyword::END if nested => close(&mut levels, &mut open),
                // Clauses end an expression (a subquery's are inside its parentheses).
                Keyword::WHEN
                | Keyword::THEN
                | Keyword::ELSE
                | Keyword::SELECT
                | Keyword::FROM
                | Keyword::WHERE
                | Keyword::GROUP
                | Keyword::HAVING
                | Keyword::ORDER
                | Keyword::LIMIT
                | Keyword::ON
                | Keyword::UNION
                | Keyword::JOIN => restart(top, &mut open),
                _ => {}
            },
            _ => {}
        }
        if open + levels.len() - 1 > MAX_EXPRESSION_DEPTH {
            return Err(crate::Error::InvalidQuery {
                message: format!(
                    "an expression nests more than {MAX_EXPRESSION_DEPTH} levels deep (operators in a row, or parentheses); write a long list of alternatives as `x IN (…)`"
                ),
            });
        }
    }
    Ok(())
}

fn derived(sql: &str) -> Option<TableFactor> {
    let mut statements = Parser::parse_sql(&GenericDialect {}, sql).ok()?;
    let Statement::Query(mut q) = statements.pop()? else {
        return None;
    };
    let SetExpr::Select(s) = q.body.as_mut() else {
        return None;
    };
    Some(s.from.pop()?.relation)
}

/// An unnest whose arguments name columns of the relations before it (plain `unnest([1, 2])`
/// plans already; offsets and ordinality are left for DataFusion to refuse).
fn is_lateral_unnest(f: &TableFactor) -> bool {
    let TableFactor::UNNEST {
        array_exprs,
        with_offset,
        with_ordinality,
        ..
    } = f
    else {
        return false;
    };
    if *with_offset || *with_ordinality || array_exprs.is_empty() {
        return false;
    }
    let mut names_a_column = false;
    let mut exprs = array_exprs.clone();
    let _ = visit_expressions_mut(&mut exprs, |e| {
        if matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_)) {
            names_a_column = true;
        }
        ControlFlow::<()>::Continue(())
    });
    names_a_column
}

fn is_on_true(c: &JoinConstraint) -> bool {
    matches!(c, JoinConstraint::On(e) if e.to_string().eq_ignore_ascii_case("true"))
}

/// The name columns of `relation` are qualified with: its alias, or its table name.
fn qualifier(relation: &TableFactor) -> Option<Ident> {
    match relation {
        TableFactor::Table { alias: Some(a), .. } | TableFactor::Derived { alias: Some(a), .. } => {
            Some(a.name.clone())
        }
        TableFactor::Table { name, .. } => name.0.last().and_then(|p| p.as_ident()).cloned(),
        _ => None,
    }
}

/// `unnest(x) AS t(a)` → `a`; `AS t` → `t` (as PostgreSQL and DuckDB name it); else `unnest`.
fn column_names(
    alias: Option<&datafusion::sql::sqlparser::ast::TableAlias>,
    n: usize,
) -> Vec<Ident> {
    (0..n)
        .map(|i| match alias {
            Some(a) if i < a.columns.len() => a.columns[i].name.clone(),
            Some(a) if a.columns.is_empty() && n == 1 => a.name.clone(),
            _ if n == 1 => Ident::new("unnest"),
            _ => Ident::new(format!("unnest_{}", i + 1)),
        })
        .collect()
}

/// `t.tag` → `events.tag` once the unnest aliased `t` is part of `events`.
fn requalify(expr: &mut Expr, renames: &[Rename]) {
    let Expr::CompoundIdentifier(parts) = expr else {
        return;
    };
    if parts.len() < 2 {
        return;
    }
    let Some(r) = renames.iter().find(|r| same_ident(&r.from, &parts[0])) else {
        return;
    };
    match &r.to {
        Some(to) => parts[0] = to.clone(),
        None => {
            parts.remove(0);
            if parts.len() == 1 {
                *expr = Expr::Identifier(parts.remove(0));
            }
        }
    }
}

fn same_ident(a: &Ident, b: &Ident) -> bool {
    if a.quote_style.is_none() && b.quote_style.is_none() {
        a.value.eq_ignore_ascii_case(&b.value)
    } else {
        a.value == b.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> String {
        let mut s = Parser::parse_sql(&GenericDialect {}, sql)
            .unwrap()
            .remove(0);
        rewrite(&mut s);
        s.to_string()
    }

    #[test]
    fn a_dotted_user_is_the_column() {
        assert_eq!(
            rewritten("SELECT user.plan, user.geo.country FROM t WHERE user.id = 1"),
            r#"SELECT "user".plan AS plan, "user".geo.country AS country FROM t WHERE "user".id = 1"#
        );
        // The keyword on its own stays the keyword.
        assert_eq!(rewritten("SELECT user FROM t"), "SELECT user FROM t");
        // Qualified columns keep their names; clashing field names are left to the user.
        assert_eq!(
            rewritten("SELECT t.id, t.a.b, s.x.id FROM t"),
            "SELECT t.id, t.a.b AS b, s.x.id FROM t"
        );
    }

    #[test]
    fn time_literals_are_microseconds() {
        assert_eq!(
            rewritten("SELECT * FROM t WHERE t = TIME '13:45:00.000007' OR t < CAST('01:00' AS TIME) OR t IN ('02:00'::TIME)"),
            "SELECT * FROM t WHERE t = arrow_cast('13:45:00.000007', 'Time64(Microsecond)') OR t < arrow_cast('01:00', 'Time64(Microsecond)') OR t IN (arrow_cast('02:00', 'Time64(Microsecond)'))"
        );
        // Nanoseconds stay nanoseconds; casts of other expressions are left alone.
        for sql in [
            "SELECT TIME '13:45:00.000000001'",
            "SELECT CAST(s AS TIME) FROM t",
            "SELECT TIMESTAMP '2021-01-01 00:00:00'",
        ] {
            assert_eq!(rewritten(sql), sql);
        }
    }

    #[test]
    fn lateral_unnests_become_derived_tables() {
        assert_eq!(
            rewritten("SELECT user.plan, count(*) FROM events CROSS JOIN unnest(tags) GROUP BY 1"),
            r#"SELECT "user".plan AS plan, count(*) FROM (SELECT *, unnest(tags) AS unnest FROM events) AS events GROUP BY 1"#
        );
        assert_eq!(
            rewritten("SELECT e.id, t.tag FROM events e, unnest(e.tags) AS t(tag) ORDER BY t.tag"),
            "SELECT e.id, e.tag FROM (SELECT *, unnest(e.tags) AS tag FROM events e) AS e ORDER BY e.tag"
        );
        // Two unnests: a cross product, as the joins say.
        assert_eq!(
            rewritten("SELECT * FROM t CROSS JOIN unnest(a) AS x CROSS JOIN unnest(b) AS y"),
            "SELECT * FROM (SELECT *, unnest(b) AS y FROM (SELECT *, unnest(a) AS x FROM t) AS t) AS t"
        );
        // Inside a subquery too; constant unnests are left alone.
        assert_eq!(
            rewritten("SELECT * FROM (SELECT id FROM t JOIN unnest(t.a) ON true) s, unnest([1, 2])"),
            "SELECT * FROM (SELECT id FROM (SELECT *, unnest(t.a) AS unnest FROM t) AS t) s, UNNEST([1, 2])"
        );
    }

    #[test]
    fn expressions_deeper_than_the_limit_are_refused_before_planning() {
        let chain = |n: usize, op: &str| {
            (0..n)
                .map(|i| format!("v = {i}"))
                .collect::<Vec<_>>()
                .join(op)
        };
        let max = MAX_EXPRESSION_DEPTH;
        assert!(check_depth(&format!("SELECT 1 FROM t WHERE {}", chain(max, " OR "))).is_ok());
        let err = check_depth(&format!("SELECT 1 FROM t WHERE {}", chain(max + 2, " OR ")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("IN ("), "{err}");
        assert!(check_depth(&format!("SELECT {}", vec!["1"; max + 2].join(" + "))).is_err());
        // Comparisons and casts chain too.
        assert!(check_depth(&format!("SELECT {}", vec!["1"; max + 2].join(" = "))).is_err());
        assert!(check_depth(&format!("SELECT v{}", "::INT".repeat(max + 1))).is_err());
        // Open parentheses count too; commas and clauses start a new expression.
        let nested = format!(
            "SELECT {}1{}",
            "(1 + ".repeat(max / 2 + 1),
            ")".repeat(max / 2 + 1)
        );
        assert!(check_depth(&nested).is_err());
        let many = (0..2 * max)
            .map(|i| format!("a + {i}"))
            .collect::<Vec<_>>()
            .join(", ");
        assert!(check_depth(&format!("SELECT {many} FROM t")).is_ok());
        let clauses = format!(
            "SELECT {} FROM t WHERE {} GROUP BY 1 HAVING {}",
            vec!["a"; max / 2].join(" + "),
            chain(max / 2, " AND "),
            chain(max / 2, " OR ")
        );
        assert!(check_depth(&clauses).is_ok());
        // A CASE inside the chain does not restart its count.
        let cased = (0..max + 2)
            .map(|i| format!("CASE WHEN v = {i} THEN true ELSE false END"))
            .collect::<Vec<_>>()
            .join(" OR ");
        assert!(check_depth(&format!("SELECT 1 FROM t WHERE {cased}")).is_err());
        let list = (0..20_000)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        assert!(check_depth(&format!("SELECT 1 FROM t WHERE v IN ({list})")).is_ok());
    }
}
