import { type DescFile, type DescMessage, type DescService, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, createServiceImplSpec, type ServiceImplSpec } from "@connectrpc/connect";
import { ServerReflection as ServerReflectionV1 } from "@spillway/proto/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ServerReflectionV1alpha } from "@spillway/proto/grpc/reflection/v1alpha/reflection_pb.js";

/** The two versions of the reflection service, which grpcurl, buf curl and grpcui ask for. */
const reflectionServices: readonly DescService[] = [ServerReflectionV1, ServerReflectionV1alpha];

/** A reflection request of either version: v1alpha's messages are v1's under another name. */
interface Request {
  readonly host: string;
  readonly messageRequest:
    | {
        case:
          | "fileByFilename"
          | "fileContainingSymbol"
          | "allExtensionNumbersOfType"
          | "listServices";
        value: string;
      }
    | {
        case: "fileContainingExtension";
        value: { readonly containingType: string; readonly extensionNumber: number };
      }
    | { case: undefined; value?: undefined };
}
/** A reflection response of either version, as the plain object both versions' schemas take. */
interface Response {
  readonly validHost: string;
  readonly originalRequest: Request;
  readonly messageResponse:
    | { case: "fileDescriptorResponse"; value: { fileDescriptorProto: Uint8Array[] } }
    | {
        case: "allExtensionNumbersResponse";
        value: { baseTypeName: string; extensionNumber: number[] };
      }
    | { case: "listServicesResponse"; value: { service: { name: string }[] } }
    | { case: "errorResponse"; value: { errorCode: number; errorMessage: string } };
}

/** Where reflection finds each file, each symbol and each extension of the services it serves. */
interface Index {
  readonly services: readonly string[];
  readonly files: ReadonlyMap<string, DescFile>;
  readonly symbols: ReadonlyMap<string, DescFile>;
  /** Extensions by the message they extend, then by field number: the file declaring each. */
  readonly extensions: ReadonlyMap<string, ReadonlyMap<number, DescFile>>;
}

/**
 * createReflectionServices serves gRPC server reflection (grpc.reflection.v1 and v1alpha) for
 * `served` and for itself, so grpcurl, buf curl, grpcui and Postman list, describe and call the
 * services without proto files. Every file is answered with the files it imports, transitively
 * (buf/validate/validate.proto and the google/protobuf files included), each sent at most once
 * per stream, as grpc-go's reflection does; a name that is not known is answered NOT_FOUND in
 * the stream's error response, and the stream goes on. The descriptors are the ones embedded in
 * the generated code: no source comments.
 */
export function createReflectionServices(served: readonly DescService[]): ServiceImplSpec[] {
  const index = buildIndex([...served, ...reflectionServices]);
  const encoded = new Map<string, Uint8Array>();
  const bytesOf = (file: DescFile) => {
    let bytes = encoded.get(file.proto.name);
    if (bytes === undefined) {
      bytes = toBinary(FileDescriptorProtoSchema, file.proto);
      encoded.set(file.proto.name, bytes);
    }
    return bytes;
  };
  const session = () => {
    const sent = new Set<string>();
    return (req: Request): Response => {
      const base = { validHost: req.host, originalRequest: plainRequest(req) };
      const files = (file: DescFile | undefined, what: string): Response => {
        if (file === undefined) return { ...base, ...notFound(what) };
        const out: Uint8Array[] = [];
        const add = (f: DescFile) => {
          if (sent.has(f.proto.name)) return;
          sent.add(f.proto.name);
          out.push(bytesOf(f));
          for (const dep of f.dependencies) add(dep);
        };
        // The file asked for always comes back, even when this stream has sent it before.
        sent.delete(file.proto.name);
        add(file);
        return {
          ...base,
          messageResponse: {
            case: "fileDescriptorResponse",
            value: { fileDescriptorProto: out },
          },
        };
      };
      const m = req.messageRequest;
      switch (m.case) {
        case "listServices":
          return {
            ...base,
            messageResponse: {
              case: "listServicesResponse",
              value: { service: index.services.map((name) => ({ name })) },
            },
          };
        case "fileByFilename":
          return files(index.files.get(m.value), `file ${m.value}`);
        case "fileContainingSymbol":
          return files(index.symbols.get(m.value), `symbol ${m.value}`);
        case "fileContainingExtension":
          return files(
            index.extensions.get(m.value.containingType)?.get(m.value.extensionNumber),
            `extension ${m.value.extensionNumber} of ${m.value.containingType}`,
          );
        case "allExtensionNumbersOfType": {
          const known = index.extensions.get(m.value);
          if (known === undefined && !index.symbols.has(m.value)) {
            return { ...base, ...notFound(`type ${m.value}`) };
          }
          return {
            ...base,
            messageResponse: {
              case: "allExtensionNumbersResponse",
              value: { baseTypeName: m.value, extensionNumber: [...(known?.keys() ?? [])] },
            },
          };
        }
        default:
          return {
            ...base,
            messageResponse: {
              case: "errorResponse",
              value: { errorCode: Code.InvalidArgument, errorMessage: "no request set" },
            },
          };
      }
    };
  };
  const impl = {
    async *serverReflectionInfo(requests: AsyncIterable<Request>) {
      const answer = session();
      for await (const req of requests) yield answer(req);
    },
  };
  return [
    createServiceImplSpec<typeof ServerReflectionV1>(ServerReflectionV1, impl),
    createServiceImplSpec<typeof ServerReflectionV1alpha>(ServerReflectionV1alpha, impl),
  ];
}

/** A request as a plain object, so that a v1alpha request can sit in either version's response. */
function plainRequest(req: Request): Request {
  const m = req.messageRequest;
  return {
    host: req.host,
    messageRequest:
      m.case === "fileContainingExtension"
        ? {
            case: m.case,
            value: {
              containingType: m.value.containingType,
              extensionNumber: m.value.extensionNumber,
            },
          }
        : m,
  };
}

function notFound(what: string): Pick<Response, "messageResponse"> {
  return {
    messageResponse: {
      case: "errorResponse",
      value: { errorCode: Code.NotFound, errorMessage: `${what} not found` },
    },
  };
}

/** Indexes the files declaring `services` and every file they import, transitively. */
function buildIndex(services: readonly DescService[]): Index {
  const files = new Map<string, DescFile>();
  const symbols = new Map<string, DescFile>();
  const extensions = new Map<string, Map<number, DescFile>>();
  const addMessage = (file: DescFile, message: DescMessage) => {
    symbols.set(message.typeName, file);
    for (const field of message.fields) symbols.set(`${message.typeName}.${field.name}`, file);
    for (const nested of message.nestedMessages) addMessage(file, nested);
    for (const nested of message.nestedEnums) symbols.set(nested.typeName, file);
    for (const ext of message.nestedExtensions) addExtension(file, ext);
  };
  const addExtension = (
    file: DescFile,
    ext: { typeName: string; extendee: DescMessage; number: number },
  ) => {
    symbols.set(ext.typeName, file);
    let byNumber = extensions.get(ext.extendee.typeName);
    if (byNumber === undefined) {
      byNumber = new Map();
      extensions.set(ext.extendee.typeName, byNumber);
    }
    byNumber.set(ext.number, file);
  };
  const addFile = (file: DescFile) => {
    if (files.has(file.proto.name)) return;
    files.set(file.proto.name, file);
    for (const message of file.messages) addMessage(file, message);
    for (const e of file.enums) symbols.set(e.typeName, file);
    for (const ext of file.extensions) addExtension(file, ext);
    for (const service of file.services) {
      symbols.set(service.typeName, file);
      for (const method of service.methods) symbols.set(`${service.typeName}.${method.name}`, file);
    }
    for (const dep of file.dependencies) addFile(dep);
  };
  for (const service of services) addFile(service.file);
  return { services: services.map((s) => s.typeName), files, symbols, extensions };
}
