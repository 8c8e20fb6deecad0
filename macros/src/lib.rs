//! Procedural macros of the [`jido`](https://docs.rs/jido) crate.
//!
//! Use them through `jido` (feature `macros`, on by default):
//! `#[jido::action]`. The documentation and examples are on the
//! re-export, `jido::action` (the attribute).

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{
    Error, Expr, ExprLit, FnArg, GenericArgument, Ident, ItemFn, Lit, LitStr, Meta, Pat,
    PathArguments, ReturnType, Token, Type,
};

/// Turns `async fn name(params: P, ctx: &Context) -> jido::Result<O>` (or
/// `async fn name(params: P) -> jido::Result<O>`) into an action: a unit
/// struct implementing `jido::Action`. See `jido::action` (the attribute)
/// for the documentation.
#[proc_macro_attribute]
pub fn action(attr: TokenStream, item: TokenStream) -> TokenStream {
    let args = syn::parse_macro_input!(attr as Args);
    let func = syn::parse_macro_input!(item as ItemFn);
    match expand(args, func) {
        Ok(tokens) => tokens.into(),
        Err(err) => err.to_compile_error().into(),
    }
}

/// `name = "..."`, `struct_name = Ident`, `category = "..."`,
/// `version = "..."`, `tags = ["...", ...]`, `crate = path`.
#[derive(Default)]
struct Args {
    name: Option<LitStr>,
    struct_name: Option<Ident>,
    category: Option<LitStr>,
    version: Option<LitStr>,
    tags: Option<Vec<LitStr>>,
    krate: Option<syn::Path>,
}

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut args = Args::default();
        let metas = Punctuated::<Meta, Token![,]>::parse_terminated(input)?;
        for meta in metas {
            let Meta::NameValue(nv) = &meta else {
                return Err(Error::new(
                    meta.span(),
                    "expected `key = value` (keys: name, struct_name, category, version, tags, crate)",
                ));
            };
            let key = nv
                .path
                .get_ident()
                .map(ToString::to_string)
                .unwrap_or_default();
            match key.as_str() {
                "name" => set(&mut args.name, lit_str(&nv.value)?, nv)?,
                "category" => set(&mut args.category, lit_str(&nv.value)?, nv)?,
                "version" => set(&mut args.version, lit_str(&nv.value)?, nv)?,
                "struct_name" => {
                    let ident = match &nv.value {
                        Expr::Path(p) => p.path.get_ident().cloned(),
                        _ => None,
                    }
                    .ok_or_else(|| {
                        Error::new(nv.value.span(), "expected a type name, e.g. `AddAction`")
                    })?;
                    set(&mut args.struct_name, ident, nv)?;
                }
                "crate" => {
                    let Expr::Path(p) = &nv.value else {
                        return Err(Error::new(
                            nv.value.span(),
                            "expected the path of the jido crate, e.g. `::my_jido`",
                        ));
                    };
                    set(&mut args.krate, p.path.clone(), nv)?;
                }
                "tags" => {
                    let Expr::Array(arr) = &nv.value else {
                        return Err(Error::new(
                            nv.value.span(),
                            "expected an array of string literals, e.g. `[\"math\"]`",
                        ));
                    };
                    let tags = arr.elems.iter().map(lit_str).collect::<syn::Result<_>>()?;
                    set(&mut args.tags, tags, nv)?;
                }
                _ => {
                    return Err(Error::new(
                        nv.path.span(),
                        "unknown key (expected one of: name, struct_name, category, version, tags, crate)",
                    ));
                }
            }
        }
        Ok(args)
    }
}

fn set<T>(slot: &mut Option<T>, value: T, at: &syn::MetaNameValue) -> syn::Result<()> {
    if slot.is_some() {
        return Err(Error::new(at.path.span(), "duplicate key"));
    }
    *slot = Some(value);
    Ok(())
}

fn lit_str(expr: &Expr) -> syn::Result<LitStr> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Ok(s.clone()),
        _ => Err(Error::new(expr.span(), "expected a string literal")),
    }
}

/// `^[a-zA-Z][a-zA-Z0-9_]*$`, the rule of `jido::action::validate_name`.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `add_numbers` → `AddNumbers`, `r#type` → `Type`.
fn camel_case(name: &str) -> String {
    let name = name.strip_prefix("r#").unwrap_or(name);
    let mut out = String::with_capacity(name.len());
    let mut upper = true;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The doc comment, one line per `///` line, with the one space after
/// `///` removed and surrounding blank lines trimmed.
fn doc_text(func: &ItemFn) -> String {
    let mut lines = Vec::new();
    for attr in &func.attrs {
        if !attr.path().is_ident("doc") {
            continue;
        }
        if let Meta::NameValue(nv) = &attr.meta {
            if let Ok(s) = lit_str(&nv.value) {
                let value = s.value();
                for line in value.split('\n') {
                    lines.push(line.strip_prefix(' ').unwrap_or(line).trim_end().to_owned());
                }
            }
        }
    }
    lines.join("\n").trim().to_owned()
}

/// `Result<O>` / `jido::Result<O>` / `Result<O, E>` → `O`.
fn output_type(ret: &ReturnType, sig_span: Span) -> syn::Result<Type> {
    let ReturnType::Type(_, ty) = ret else {
        return Err(Error::new(
            sig_span,
            "an action fn must return `jido::Result<Output>`",
        ));
    };
    let err = || {
        Error::new(
            ty.span(),
            "expected `jido::Result<Output>` as the return type",
        )
    };
    let Type::Path(path) = &**ty else {
        return Err(err());
    };
    let last = path.path.segments.last().ok_or_else(err)?;
    if last.ident != "Result" {
        return Err(err());
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return Err(err());
    };
    match args.args.first() {
        Some(GenericArgument::Type(t)) => Ok(t.clone()),
        _ => Err(err()),
    }
}

fn expand(args: Args, func: ItemFn) -> syn::Result<TokenStream2> {
    let sig = &func.sig;
    if sig.asyncness.is_none() {
        return Err(Error::new(
            sig.fn_token.span(),
            "an action fn must be `async`",
        ));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(Error::new(
            sig.generics.span(),
            "an action fn cannot be generic",
        ));
    }
    if let Some(v) = &sig.variadic {
        return Err(Error::new(v.span(), "an action fn cannot be variadic"));
    }
    let mut inputs = Vec::new();
    for arg in &sig.inputs {
        match arg {
            FnArg::Receiver(r) => {
                return Err(Error::new(
                    r.span(),
                    "an action fn cannot take `self`; write a free function",
                ));
            }
            FnArg::Typed(t) => inputs.push(t),
        }
    }
    let params_ty = match inputs.as_slice() {
        [p] | [p, _] => &p.ty,
        [] => {
            return Err(Error::new(
                sig.paren_token.span.join(),
                "an action fn takes its params and optionally the context: \
                 `(params: P)` or `(params: P, ctx: &Context)`",
            ));
        }
        [_, _, extra, ..] => {
            return Err(Error::new(
                extra.span(),
                "too many arguments: an action fn takes `(params: P)` or \
                 `(params: P, ctx: &Context)`",
            ));
        }
    };
    if let [_, ctx] = inputs.as_slice() {
        if !matches!(&*ctx.ty, Type::Reference(r) if r.mutability.is_none()) {
            return Err(Error::new(
                ctx.ty.span(),
                "the context argument must be `&Context` (`&jido::Context`)",
            ));
        }
        if let Pat::Ident(_) | Pat::Wild(_) = &*ctx.pat {
        } else {
            return Err(Error::new(ctx.pat.span(), "expected a name or `_`"));
        }
    }
    let output_ty = output_type(&sig.output, sig.ident.span())?;

    let fn_ident = &sig.ident;
    let fn_name = fn_ident.to_string();
    let fn_name = fn_name.strip_prefix("r#").unwrap_or(&fn_name).to_owned();
    let name = match &args.name {
        Some(lit) => {
            if !valid_name(&lit.value()) {
                return Err(Error::new(
                    lit.span(),
                    "invalid action name: must match ^[a-zA-Z][a-zA-Z0-9_]*$",
                ));
            }
            lit.value()
        }
        None => {
            if !valid_name(&fn_name) {
                return Err(Error::new(
                    fn_ident.span(),
                    "invalid action name: must match ^[a-zA-Z][a-zA-Z0-9_]*$ \
                     (give one with `#[jido::action(name = \"...\")]`)",
                ));
            }
            fn_name.clone()
        }
    };
    let struct_ident = args
        .struct_name
        .clone()
        .unwrap_or_else(|| format_ident!("{}", camel_case(&fn_name), span = fn_ident.span()));
    let description = doc_text(&func);
    let vis = &func.vis;

    // Type errors of the call point at the user's argument types.
    let params_arg = quote_spanned!(params_ty.span()=> params);
    let call = match inputs.as_slice() {
        [_, ctx_arg] => {
            let ctx_arg = quote_spanned!(ctx_arg.ty.span()=> ctx);
            quote!(#fn_ident(#params_arg, #ctx_arg).await)
        }
        _ => quote!({ let _ = ctx; #fn_ident(#params_arg).await }),
    };
    let category = args
        .category
        .as_ref()
        .map(|c| quote!(const CATEGORY: &'static str = #c;));
    let version = args
        .version
        .as_ref()
        .map(|v| quote!(const VERSION: &'static str = #v;));
    let tags = args
        .tags
        .as_ref()
        .map(|t| quote!(const TAGS: &'static [&'static str] = &[#(#t),*];));
    let struct_doc = format!("The action `{name}`, made from [`{fn_name}`] by `#[jido::action]`.");

    // "not Send" and similar errors point at the user's `async fn`.
    let jido = args
        .krate
        .as_ref()
        .map_or_else(|| quote!(::jido), |p| quote!(#p));
    let run_sig = quote_spanned!(sig.fn_token.span()=> async fn run);
    Ok(quote! {
        #func

        #[doc = #struct_doc]
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
        #vis struct #struct_ident;

        impl #jido::Action for #struct_ident {
            type Params = #params_ty;
            type Output = #output_ty;
            const NAME: &'static str = #name;
            const DESCRIPTION: &'static str = #description;
            #category
            #version
            #tags

            #run_sig(
                &self,
                params: #params_ty,
                ctx: &#jido::Context,
            ) -> #jido::Result<#output_ty> {
                #call
            }
        }
    })
}
